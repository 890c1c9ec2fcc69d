"""`bringup port`: find CUDA-only PyTorch code and rewrite it device-agnostic (libcst).

from bringup.port import scan
report = scan(["src/"])            # nothing written; BadInput for a missing path
report.to_json()                   # {"findings": [{file, line, col, code, message, fixable}], "summary": {...}}
"""

from bringup.port.rules import CODES, RULES, Rule, parse_select
from bringup.port.scanner import Finding, PortReport, port, scan

__all__ = ["CODES", "RULES", "Finding", "PortReport", "Rule", "parse_select", "port", "scan"]
