"""`bringup port`: find CUDA-only PyTorch code and rewrite it device-agnostic (libcst).

from bringup.port import scan
report = scan(["src/"])            # nothing written; BadInput for a missing path
report.to_json()                   # {"findings": [{file, line, col, code, message, fixable}], "summary": {...}}
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bringup.port.rules import CODES, RULES, Rule, parse_select
    from bringup.port.scanner import Finding, PortReport, port, scan

__all__ = ["CODES", "RULES", "Finding", "PortReport", "Rule", "parse_select", "port", "scan"]
_WHERE = {"CODES": "rules", "RULES": "rules", "Rule": "rules", "parse_select": "rules"}


def __getattr__(name: str) -> Any:
    """The names above, imported on first use: libcst (about 1 s to import) stays out of `bringup --help`
    and `bringup port --help`, which import this package for bringup.port.cli."""
    if name not in __all__:
        raise AttributeError(f"module 'bringup.port' has no attribute {name!r}")
    return getattr(importlib.import_module(f"bringup.port.{_WHERE.get(name, 'scanner')}"), name)
