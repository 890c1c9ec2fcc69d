"""One libcst pass over a module: find CUDA-only constructs (and, with `fix`, rewrite them).

Names are resolved with libcst's QualifiedNameProvider, so `import torch as th`, `from torch import
cuda`, `from torch.cuda import synchronize as sync` are all seen as `torch.cuda.*`. A finding is
recorded on the original node's position; a rewrite is made only when `fix` is on and the rule's
rewrite keeps the meaning on CUDA (see `rules.py` and docs/port.md). Rewrites that need the device
use one module-level name introduced after the imports (`DEVICE = torch.accelerator.
current_accelerator(check_available=True) or torch.device("cpu")`), so the code falls back to cpu,
also on a CUDA build of torch with no GPU (without the argument that build answers cuda). The check
asks the driver at import time; docs/port.md says what that costs (a later CUDA_VISIBLE_DEVICES, fork).

The transformer is one class composed of rule families (mixins over `base.CodemodBase`): string
literals (`literals.py`), calls (`calls.py`), other references and environment variables (`refs.py`);
the name tables are in `names.py`. This module composes them and runs one module through it.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import RemoveImportsVisitor
from libcst.metadata import MetadataWrapper

from bringup.port.base import DEVICE_COMMENT, CodemodBase
from bringup.port.calls import CallRules
from bringup.port.literals import LiteralRules
from bringup.port.names import CUDA_FNS, CudaFn, Hit, cuda_ok_lines, may_have_findings, normalize
from bringup.port.refs import ReferenceRules

__all__ = [
    "CUDA_FNS", "DEVICE_COMMENT", "CudaFn", "Hit", "ModuleResult", "PortCodemod", "cuda_ok_lines",
    "may_have_findings", "normalize", "run_module",
]  # fmt: skip


class PortCodemod(LiteralRules, CallRules, ReferenceRules, CodemodBase):
    """Visit the wrapper's module (`context.wrapper`). Metadata is resolved lazily - qualified names on
    the first lookup, positions on the first finding - since libcst's providers dominate the cost."""


@dataclass
class ModuleResult:
    hits: list[Hit]
    code: str  # the rewritten source (== the input when nothing was fixed)
    fixed: int


def run_module(source: str, select: set[str] | None, fix: bool) -> ModuleResult:
    """Scan (and with `fix`, rewrite) one module's source. Raises libcst.ParserSyntaxError."""
    module = cst.parse_module(source)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    context = CodemodContext(wrapper=wrapper)
    cmd = PortCodemod(context, select, fix, cuda_ok_lines(source))
    new = wrapper.module.visit(cmd)
    if fix and cmd.st.fixed and RemoveImportsVisitor.CONTEXT_KEY in context.scratch:
        new = RemoveImportsVisitor(CodemodContext(scratch=context.scratch)).transform_module(new)
    hits = sorted(cmd.st.hits, key=lambda h: (h.line, h.col, h.code))
    code = new.code if fix and cmd.st.fixed else source
    return ModuleResult(hits, code, cmd.st.fixed if fix else 0)
