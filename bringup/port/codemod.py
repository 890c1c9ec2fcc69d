"""One libcst pass over a module: find CUDA-only constructs (and, with `fix`, rewrite them).

Names are resolved with libcst's QualifiedNameProvider, so `import torch as th`, `from torch import
cuda`, `from torch.cuda import synchronize as sync` are all seen as `torch.cuda.*`. A finding is
recorded on the original node's position; a rewrite is made only when `fix` is on and the rule's
rewrite keeps the meaning on CUDA (see `rules.py` and docs/port.md). Rewrites that need the device
use one module-level name introduced after the imports (`DEVICE = torch.accelerator.
current_accelerator(check_available=True) or torch.device("cpu")`), so the code falls back to cpu,
also on a CUDA build of torch with no GPU (without the argument that build answers cuda). The check
asks the driver at import time; docs/port.md says what that costs (a later CUDA_VISIBLE_DEVICES, fork).
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import libcst as cst
from libcst._metadata_dependent import LazyValue
from libcst.codemod import CodemodContext, ContextAwareTransformer
from libcst.codemod.visitors import RemoveImportsVisitor
from libcst.metadata import MetadataWrapper, PositionProvider, QualifiedNameProvider, QualifiedNameSource

from bringup.port.rules import DEVICE_NAME, DEVICE_NAME_FALLBACKS

DEVICE_COMMENT = "# the accelerator (cuda, xpu, mps, ...) or cpu: added by bringup port"


@dataclass(frozen=True)
class Hit:
    """A finding in one module (line 1-based, col 1-based)."""

    line: int
    col: int
    code: str
    message: str
    fixable: bool


# ---- name tables ---------------------------------------------------------------------------------
# torch.cuda.<sub>.<name> re-exported as torch.cuda.<name>
_CUDA_SUBMODULES = ("memory", "random", "streams", "graphs")
_RENAMES = {
    "torch.cuda.amp.autocast_mode.autocast": "torch.cuda.amp.autocast",
    "torch.cuda.amp.grad_scaler.GradScaler": "torch.cuda.amp.GradScaler",
    "torch.amp.autocast_mode.autocast": "torch.autocast",
    "torch.amp.autocast": "torch.autocast",
    "torch.amp.grad_scaler.GradScaler": "torch.amp.GradScaler",
    "torch.cpu.amp.autocast_mode.autocast": "torch.cpu.amp.autocast",
    "torch.amp.autocast_mode.custom_fwd": "torch.amp.custom_fwd",
    "torch.amp.autocast_mode.custom_bwd": "torch.amp.custom_bwd",
    "torch.distributed.distributed_c10d.init_process_group": "torch.distributed.init_process_group",
    "torch.distributed.distributed_c10d.new_group": "torch.distributed.new_group",
}


def normalize(qn: str) -> str:
    qn = _RENAMES.get(qn, qn)
    for sub in _CUDA_SUBMODULES:
        pre = f"torch.cuda.{sub}."
        if qn.startswith(pre):
            return "torch.cuda." + qn[len(pre) :]
    return qn


@dataclass(frozen=True)
class CudaFn:
    """How a torch.cuda function maps: `target` (torch.<target>) or None (manual)."""

    code: str
    target: str | None = None
    guard: str | None = None  # fallback value when no accelerator: the call is guarded by is_available()
    device_kw: bool = True  # its `device=` keyword becomes positional (torch.accelerator is positional-only)
    ref_ok: bool = False  # a bare reference (no call) may be renamed too (same signature)
    manual: str = ""


_ACC = "accelerator."
CUDA_FNS: dict[str, CudaFn] = {
    "is_available": CudaFn("BU110", _ACC + "is_available", ref_ok=True),
    "device_count": CudaFn("BU110", _ACC + "device_count", ref_ok=True),
    "current_device": CudaFn("BU110", _ACC + "current_device_index", ref_ok=True),
    "set_device": CudaFn("BU110", _ACC + "set_device_index", guard="None"),
    "synchronize": CudaFn("BU110", _ACC + "synchronize", guard="None"),
    "device": CudaFn("BU110", manual="use `torch.accelerator.device_index(i)` (an int index)"),
    "device_of": CudaFn("BU110", manual="use `torch.accelerator.device_index(t.device.index)`"),
    "memory_allocated": CudaFn("BU111", _ACC + "memory_allocated", guard="0"),
    "max_memory_allocated": CudaFn("BU111", _ACC + "max_memory_allocated", guard="0"),
    "memory_reserved": CudaFn("BU111", _ACC + "memory_reserved", guard="0"),
    "max_memory_reserved": CudaFn("BU111", _ACC + "max_memory_reserved", guard="0"),
    "memory_cached": CudaFn("BU111", _ACC + "memory_reserved", guard="0"),
    "max_memory_cached": CudaFn("BU111", _ACC + "max_memory_reserved", guard="0"),
    "memory_stats": CudaFn("BU111", _ACC + "memory_stats", guard="{}"),
    "reset_peak_memory_stats": CudaFn("BU111", _ACC + "reset_peak_memory_stats", guard="None"),
    "reset_max_memory_allocated": CudaFn("BU111", _ACC + "reset_peak_memory_stats", guard="None"),
    "reset_accumulated_memory_stats": CudaFn("BU111", _ACC + "reset_accumulated_memory_stats", guard="None"),
    "empty_cache": CudaFn("BU111", _ACC + "empty_cache", guard="None"),
    "mem_get_info": CudaFn("BU111", _ACC + "get_memory_info"),
    "Event": CudaFn("BU112", "Event", device_kw=False),
    "Stream": CudaFn("BU112", "Stream", device_kw=False),
    "current_stream": CudaFn("BU112", _ACC + "current_stream"),
    "set_stream": CudaFn("BU112", _ACC + "set_stream", device_kw=False),
    "stream": CudaFn("BU112", manual="use `with s:` (torch.Stream is a context manager) when s is not None"),
    "default_stream": CudaFn(
        "BU112", manual="no device-generic default stream: use torch.accelerator.current_stream()"
    ),
    "ExternalStream": CudaFn("BU112", manual="no device-generic external stream"),
    "StreamContext": CudaFn("BU112", manual="use `with s:` (torch.Stream is a context manager)"),
    "OutOfMemoryError": CudaFn("BU117", "OutOfMemoryError", device_kw=False, ref_ok=True),
    "amp.autocast": CudaFn("BU120", "autocast", device_kw=False),
    "amp.GradScaler": CudaFn("BU121", "amp.GradScaler", device_kw=False),
    "amp.custom_fwd": CudaFn("BU123", "amp.custom_fwd", device_kw=False),
    "amp.custom_bwd": CudaFn("BU123", "amp.custom_bwd", device_kw=False),
}
_RNG = {"manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed", "get_rng_state", "get_rng_state_all",
        "set_rng_state", "set_rng_state_all", "default_generators"}  # fmt: skip
_PROPS = {"get_device_name", "get_device_properties", "get_device_capability", "is_bf16_supported",
          "is_tf32_supported", "get_arch_list", "get_gencode_flags", "utilization", "temperature", "power_draw",
          "clock_rate", "device_memory_used"}  # fmt: skip
_MEMORY = {"ipc_collect", "list_gpu_processes", "MemPool", "use_mem_pool", "set_per_process_memory_fraction",
           "get_per_process_memory_fraction", "caching_allocator_alloc", "caching_allocator_delete"}  # fmt: skip
_GRAPHS = {"CUDAGraph", "graph", "make_graphed_callables", "graph_pool_handle", "is_current_stream_capturing"}
_RNG_HINT = {
    "manual_seed": "torch.manual_seed(s) seeds cpu and every accelerator; "
    "torch.get_device_module(DEVICE).manual_seed(s) where the backend has it",
    "manual_seed_all": "torch.manual_seed(s) seeds cpu and every accelerator; "
    "torch.get_device_module(DEVICE).manual_seed_all(s) where the backend has it",
}
_PROP_HINT = {
    "get_device_name": "torch.get_device_module(DEVICE).get_device_name() where the backend has it, else DEVICE.type",
    "get_device_capability": "torch.accelerator.get_device_capability() returns a dict (supported dtypes), "
    "not a (major, minor) pair: test features, not CUDA versions",
    "get_device_properties": "torch.get_device_module(DEVICE).get_device_properties() where the backend has it; "
    "memory: torch.accelerator.get_memory_info()",
    "is_bf16_supported": "torch.bfloat16 in torch.accelerator.get_device_capability()['supported_dtypes']",
}

# torch functions whose first positional argument is a device: (qualified name, role, keyword)
_DEV_POS0: dict[str, tuple[str, str]] = {
    "torch.Generator": ("dev", "device"),
    "torch.set_default_device": ("dev", "device"),
    "torch.get_device_module": ("dev", "device"),
    "torch.Stream": ("dev", "device"),
    "torch.Event": ("dev", "device"),
    "torch.accelerator.synchronize": ("dev", "device"),
    "torch.accelerator.current_stream": ("dev", "device"),
    "torch.accelerator.set_device_index": ("dev", "device"),
    "torch.accelerator.device_count": ("dev", "device"),
    "torch.autocast": ("amp", "device_type"),
    "torch.amp.GradScaler": ("amp", "device"),
    "torch.is_autocast_enabled": ("amp", "device_type"),
    "torch.get_autocast_dtype": ("amp", "device_type"),
    "torch.set_autocast_dtype": ("amp", "device_type"),
    "torch.set_autocast_enabled": ("amp", "device_type"),
    "torch.distributed.init_process_group": ("backend", "backend"),
    "torch.distributed.new_group": ("backend", "backend"),
    "torch.distributed.new_subgroups": ("backend", "backend"),
    "torch.distributed.Backend": ("backend", "name"),
}
_ENV_RE = re.compile(r"^(CUDA_|PYTORCH_CUDA_|PYTORCH_NVML|NCCL_|TORCH_NCCL_|CUBLAS|CUDNN_|NVIDIA_|CUBLASLT_)")
_ENV_HINT = {
    "CUDA_VISIBLE_DEVICES": "hides CUDA devices only; each backend has its own (HIP_VISIBLE_DEVICES, "
    "ZE_AFFINITY_MASK, NEURON_RT_VISIBLE_CORES...): select the device in code or in the launcher",
    "PYTORCH_CUDA_ALLOC_CONF": "PYTORCH_ALLOC_CONF is the device-generic name of the allocator settings",
    "CUDA_LAUNCH_BLOCKING": "CUDA-only debugging switch; other backends have their own",
}
_CUDA_HINT = re.compile(
    rb"\.cuda\b|\bcuda\s*[.,)]|import[^\n]*\bcuda\b|['\"]cuda|cudnn|['\"]nccl|is_cuda"
    rb"|['\"](?:CUDA_|PYTORCH_CUDA|PYTORCH_NVML|NCCL_|TORCH_NCCL|CUBLAS|CUDNN_|NVIDIA_)"
)


def may_have_findings(source: bytes) -> bool:
    """Fast pre-filter: a module without any of these words has no finding."""
    return _CUDA_HINT.search(source) is not None


def cuda_ok_lines(code: str) -> frozenset[int]:
    """Lines with a `# cuda-ok` comment (a deliberate CUDA-ism: no finding, no rewrite there)."""
    out = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            if tok.type == tokenize.COMMENT and re.match(r"#\s*cuda-ok\b", tok.string):
                out.add(tok.start[0])
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    return frozenset(out)


# ---- string helpers ------------------------------------------------------------------------------
def _str_value(node: cst.CSTNode) -> str | None:
    if isinstance(node, cst.SimpleString) and "b" not in node.prefix.lower():
        try:
            v = node.evaluated_value
        except Exception:
            return None
        return v if isinstance(v, str) else None
    return None


def _is_cuda_str(v: str | None) -> bool:
    return v is not None and (v == "cuda" or v.startswith("cuda:"))


def _cuda_fstring(node: cst.CSTNode) -> bool:
    if not isinstance(node, cst.FormattedString) or not node.parts:
        return False
    p0 = node.parts[0]
    return isinstance(p0, cst.FormattedStringText) and (p0.value == "cuda" or p0.value.startswith("cuda:"))


def _method(func: cst.BaseExpression, qn: str | None) -> str | None:
    """`obj.name(...)` on something that is not a torch API: the method name."""
    if isinstance(func, cst.Attribute) and not (qn or "").startswith("torch."):
        return func.attr.value
    return None


def _looks_like_device(node: cst.CSTNode) -> bool:
    if isinstance(node, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString, cst.Tuple, cst.List, cst.Set)):
        return False
    code = cst.Module([]).code_for_node(node).lower()
    return "dev" in code or "backend" in code or code.endswith(".type")


def _expr(code: str) -> cst.BaseExpression:
    return cst.parse_expression(code)


def _comma_list(args: Sequence[cst.Arg], trailing: cst.Comma | cst.MaybeSentinel) -> list[cst.Arg]:
    """`args` with a comma after each but the last (new ones copy the style of the first existing
    comma, so one-argument-per-line calls stay that way) and `trailing` after the last."""
    template = next((a.comma for a in args if isinstance(a.comma, cst.Comma)), None)
    template = template or cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    out = []
    for i, a in enumerate(args):
        if i < len(args) - 1:
            if not isinstance(a.comma, cst.Comma):
                a = a.with_changes(comma=template)
        else:
            a = a.with_changes(comma=trailing)
        out.append(a)
    return out


def _trailing(args: Sequence[cst.Arg]) -> cst.Comma | cst.MaybeSentinel:
    return args[-1].comma if args and isinstance(args[-1].comma, cst.Comma) else cst.MaybeSentinel.DEFAULT


def _positional(a: cst.Arg) -> cst.Arg:
    return a.with_changes(keyword=None, equal=cst.MaybeSentinel.DEFAULT)


def _kw(name: str, a: cst.Arg) -> cst.Arg:
    return a.with_changes(keyword=cst.Name(name), equal=cst.AssignEqual(
        whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))  # fmt: skip


def _arg(value: cst.BaseExpression, keyword: str | None = None) -> cst.Arg:
    if keyword is None:
        return cst.Arg(value=value)
    return cst.Arg(value=value, keyword=cst.Name(keyword), equal=cst.AssignEqual(
        whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))  # fmt: skip


def _find_arg(args: Sequence[cst.Arg], pos: int | None, kw: str | None) -> cst.Arg | None:
    positional = [a for a in args if a.keyword is None and not a.star]
    if pos is not None and pos < len(positional):
        return positional[pos]
    for a in args:
        if a.keyword is not None and a.keyword.value == kw:
            return a
    return None


# ---- the codemod ---------------------------------------------------------------------------------
@dataclass
class _State:
    hits: list[Hit] = field(default_factory=list)
    fixed: int = 0
    needs_device: bool = False
    needs_torch: bool = False


class PortCodemod(ContextAwareTransformer):
    """Visit the wrapper's module (`context.wrapper`). Metadata is resolved lazily - qualified names on
    the first lookup, positions on the first finding - since libcst's providers dominate the cost."""

    def __init__(self, context: CodemodContext, select: set[str] | None, fix: bool, ok_lines: frozenset[int]):
        super().__init__(context)
        self._qn: Any = None
        self._pos: Any = None
        self._parents: dict[int, cst.CSTNode] = {}
        self._stack: list[cst.CSTNode] = []
        self.select = select
        self.fix = fix
        self.ok_lines = ok_lines
        self.st = _State()
        self.roles: dict[int, str] = {}  # id(original node) -> role of a string found there
        self.fixed_strings: set[int] = set()
        self.guard_stmts: dict[int, cst.BaseExpression] = {}  # id(original SimpleStatementLine) -> guard test
        self.T = "torch"
        self.D = DEVICE_NAME
        self.head_binds_torch = False
        self.device_exists = False
        self.head_len = 0

    # -- helpers
    def active(self, code: str) -> bool:
        return self.select is None or code in self.select

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self._stack:
            self._parents[id(node)] = self._stack[-1]
        self._stack.append(node)
        return super().on_visit(node)

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> Any:
        try:
            return super().on_leave(original_node, updated_node)
        finally:
            self._stack.pop()

    def position(self, node: cst.CSTNode) -> Any:
        if self._pos is None:
            assert self.context.wrapper is not None
            self._pos = self.context.wrapper.resolve(PositionProvider)
        return self._pos[node]

    def qnames(self, node: cst.CSTNode) -> Any:
        if self._qn is None:
            assert self.context.wrapper is not None
            self._qn = self.context.wrapper.resolve(QualifiedNameProvider)
        v = self._qn.get(node, ())
        return v() if isinstance(v, LazyValue) else v

    def qname(self, node: cst.CSTNode) -> str | None:
        """The imported name a plain dotted reference (`a.b.c`, no calls or subscripts) resolves to."""
        base = node
        while isinstance(base, cst.Attribute):
            base = base.value
        if not isinstance(base, cst.Name):
            return None
        for q in self.qnames(node):
            if q.source == QualifiedNameSource.IMPORT:
                return normalize(q.name)
        return None

    def suppressed(self, node: cst.CSTNode) -> bool:
        if not self.ok_lines:
            return False
        pos = self.position(node)
        return any(ln in self.ok_lines for ln in range(pos.start.line, pos.end.line + 1))

    def report(self, node: cst.CSTNode, code: str, message: str, fixable: bool) -> bool:
        """Record a finding; True when the caller should rewrite."""
        if not self.active(code) or self.suppressed(node):
            return False
        pos = self.position(node).start
        self.st.hits.append(Hit(pos.line, pos.column + 1, code, message, fixable))
        if fixable and self.fix:
            self.st.fixed += 1
            return True
        return False

    def dev(self) -> cst.BaseExpression:
        self.st.needs_device = True
        return cst.Name(self.D)

    def dev_type(self) -> cst.BaseExpression:
        self.st.needs_device = True
        return _expr(f"{self.D}.type")

    def torch_expr(self, code: str) -> cst.BaseExpression:
        """An expression over the module's torch alias (`torch.x` -> `th.x`)."""
        self.st.needs_torch = True
        if "DEVICE" in code:
            self.st.needs_device = True
        return _expr(code.replace("torch.", f"{self.T}.").replace("DEVICE", self.D))

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self._parents.get(id(node))

    def is_maximal(self, node: cst.CSTNode) -> bool:
        p = self.parent(node)
        return not (isinstance(p, cst.Attribute) and p.value is node)

    def set_role(self, node: cst.CSTNode | None, role: str) -> None:
        if node is not None:
            self.roles[id(node)] = role

    # -- module: torch alias, device name, head of imports
    def visit_Module(self, node: cst.Module) -> None:
        names = {n.value for n in _collect_names(node)}
        head = 0
        for i, stmt in enumerate(node.body):
            if _is_docstring(stmt) and i == 0 or _is_import_line(stmt):
                head = i + 1
                continue
            break
        self.head_len = head
        # where the module binds torch at top level: the first such import line (and its alias)
        for i, stmt in enumerate(node.body):
            aliases = _torch_aliases(stmt)
            if aliases:
                self.T, self.head_binds_torch = ("torch" if "torch" in aliases else aliases[0]), True
                # after the head, or right after that import when it comes later (after a sys.path or
                # os.environ line, say): the module's own import order is kept
                self.head_len = max(head, i + 1)
                break
        for stmt in node.body:
            name = _device_assignment(stmt)
            if name is not None:
                self.D, self.device_exists = name, True
                return
        for cand in (DEVICE_NAME, *DEVICE_NAME_FALLBACKS):
            if cand not in names:
                self.D = cand
                return
        i = 2
        while f"{DEVICE_NAME}_{i}" in names:
            i += 1
        self.D = f"{DEVICE_NAME}_{i}"

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        add: list[cst.BaseStatement] = []
        if (self.st.needs_torch or self.st.needs_device) and not self.head_binds_torch:
            add.append(cst.parse_statement("import torch\n"))
        if self.st.needs_device and not self.device_exists:
            accel = f"{self.T}.accelerator.current_accelerator(check_available=True)"
            stmt = cst.parse_statement(f'{self.D} = {accel} or {self.T}.device("cpu")\n')
            note = cst.Comment(DEVICE_COMMENT)
            stmt = stmt.with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine(comment=note)])
            add.append(stmt)
        if not add:
            return updated_node
        body = list(updated_node.body)
        h = self.head_len
        if h == 0 and add[0].leading_lines:  # nothing above: no blank line at the top of the file
            add[0] = add[0].with_changes(leading_lines=[ln for ln in add[0].leading_lines if ln.comment])
        if h < len(body):  # keep the code below apart: a blank line (two before a def or class)
            want = 2 if isinstance(body[h], (cst.FunctionDef, cst.ClassDef)) else 1
            have = sum(1 for ln in body[h].leading_lines if ln.comment is None)
            if have < want:
                body[h] = body[h].with_changes(
                    leading_lines=[*[cst.EmptyLine()] * (want - have), *body[h].leading_lines]
                )
        return updated_node.with_changes(body=[*body[:h], *add, *body[h:]])

    # -- imports are never findings
    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    # -- contexts of string literals (pre-order)
    def visit_Assign(self, node: cst.Assign) -> None:
        self.set_role(node.value, "value")

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self.set_role(node.value, "value")

    def visit_Return(self, node: cst.Return) -> None:
        self.set_role(node.value, "value")

    def visit_Param(self, node: cst.Param) -> None:
        self.set_role(node.default, "value")

    def visit_DictElement(self, node: cst.DictElement) -> None:
        k = _str_value(node.key)
        if k is not None and ("device" in k.lower() or "backend" in k.lower()):
            self.set_role(node.value, "value")

    def visit_IfExp(self, node: cst.IfExp) -> None:
        role = self.roles.get(id(node))
        if role:
            self.set_role(node.body, role)
            self.set_role(node.orelse, role)

    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> None:
        role = self.roles.get(id(node))
        if role:
            self.set_role(node.left, role)
            self.set_role(node.right, role)

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        role = self.roles.get(id(node))
        if role and isinstance(node.operator, (cst.Add, cst.Modulo)):
            self.set_role(node.left, "str" if role == "dev" else role)

    def visit_List(self, node: cst.List) -> None:
        self._elements(node)

    def visit_Tuple(self, node: cst.Tuple) -> None:
        self._elements(node)

    def visit_Set(self, node: cst.Set) -> None:
        self._elements(node)

    def _elements(self, node: cst.List | cst.Tuple | cst.Set) -> None:
        """Into `["cuda:0", "cuda:1"]`, not into `("cpu", "cuda", "xpu")` (that code knows many backends)."""
        role = self.roles.get(id(node))
        if (
            role in ("value", "cmp")
            and node.elements
            and all(_is_cuda_str(_str_value(el.value)) or _str_value(el.value) == "nccl" for el in node.elements)
        ):
            for el in node.elements:
                self.set_role(el.value, role)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        """`x.device.type == "cuda"`, `args.device in ("cuda",)`, `backend == "nccl"`: only when the other
        side looks like a device or a backend (its code says dev.../backend or ends in `.type`)."""
        operands = [node.left, *(c.comparator for c in node.comparisons)]
        if any(_looks_like_device(o) for o in operands):
            for o in operands:
                self.set_role(o, "cmp")

    def visit_Call(self, node: cst.Call) -> None:
        qn = self.qname(node.func)
        method = _method(node.func, qn)
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "format" and self.roles.get(id(node)):
            self.set_role(node.func.value, "str" if self.roles[id(node)] == "dev" else self.roles[id(node)])
        args = node.args
        if qn == "torch.device":
            a = _find_arg(args, 0, "type")
            self.set_role(a.value if a else None, "str")
        elif qn in _DEV_POS0:
            role, kw = _DEV_POS0[qn]
            a = _find_arg(args, 0, kw)
            self.set_role(a.value if a else None, role)
        elif qn in ("torch.amp.custom_fwd", "torch.amp.custom_bwd"):
            a = _find_arg(args, None, "device_type")
            self.set_role(a.value if a else None, "amp")
        elif qn == "torch.load":
            a = _find_arg(args, 1, "map_location")
            self.set_role(a.value if a else None, "dev")
        elif qn is not None and qn.startswith("torch.cuda."):
            name = qn[len("torch.cuda.") :]
            fn = CUDA_FNS.get(name)
            if fn is not None and (fn.device_kw or name == "Stream"):
                a = _find_arg(args, 0, "device")
                self.set_role(a.value if a else None, "dev")
        elif method in ("to", "cuda"):
            a = _find_arg(args, 0, "device")
            self.set_role(a.value if a else None, "dev")
        elif method in ("startswith", "endswith") and args and isinstance(node.func, cst.Attribute):
            if _looks_like_device(node.func.value):
                self.set_role(args[0].value, "cmp")
        for a in args:
            if a.keyword is None or id(a.value) in self.roles:
                continue
            kw = a.keyword.value
            if method == "pin_memory":
                continue
            if kw == "device":
                self.set_role(a.value, "dev" if (qn or "").startswith("torch.") or method else "str")
            elif kw == "map_location":
                self.set_role(a.value, "dev")
            elif kw == "device_type":
                self.set_role(a.value, "amp" if (qn or "").startswith(("torch.autocast", "torch.amp")) else "str")
            elif kw.endswith("_device") or kw in ("device_map",):
                self.set_role(a.value, "str")
            elif kw == "backend":
                self.set_role(a.value, "backend")
            elif kw == "default":
                self.set_role(a.value, "value")

    # -- string literals
    def leave_SimpleString(self, original_node: cst.SimpleString, updated_node: cst.SimpleString) -> cst.BaseExpression:
        role = self.roles.get(id(original_node))
        if role is None:
            return updated_node
        v = _str_value(original_node)
        if _is_cuda_str(v):
            return self._cuda_literal(original_node, updated_node, role, v or "")
        if v == "nccl":
            return self._nccl_literal(original_node, updated_node, role)
        return updated_node

    def leave_FormattedString(
        self, original_node: cst.FormattedString, updated_node: cst.FormattedString
    ) -> cst.BaseExpression:
        role = self.roles.get(id(original_node))
        if role is None or not _cuda_fstring(original_node):
            return updated_node
        return self._cuda_literal(original_node, updated_node, role, None)

    def _cuda_literal(
        self, orig: cst.BaseExpression, upd: cst.BaseExpression, role: str, v: str | None
    ) -> cst.BaseExpression:
        shown = v if v is not None else 'f"cuda:{...}"'
        literal_ok = not isinstance(orig, cst.SimpleString) or orig.raw_value.startswith("cuda")
        if role == "cmp":
            self.report(orig, "BU104", f'compares a device with "{shown}" (true only on CUDA): compare with '
                        f'{self.D}.type, or test `.type != "cpu"` for any accelerator', False)  # fmt: skip
            return upd
        if role == "backend":
            return upd
        code = {"dev": "BU102", "str": "BU102", "amp": "BU122", "value": "BU103"}[role]
        if v == "cuda" and role == "dev":
            new, what = "DEV", self.D
        elif v is not None and role == "dev" and re.fullmatch(r"cuda:\d+", v):
            new, what = "DEVIDX", f"torch.device({self.D}.type, {v[5:]})"
        elif v == "cuda":
            new, what = "TYPE", f"{self.D}.type"
        else:
            new, what = "FSTR", f'f"{{{self.D}.type}}{(v or "cuda:...")[4:]}"'
        msgs = {"BU102": f'device "{shown}" is CUDA-only: use {what}',
                "BU103": f'device string "{shown}" is CUDA-only: use {what}',
                "BU122": f'autocast/GradScaler device type "{shown}" is CUDA-only: use {what}'}  # fmt: skip
        if not self.report(orig, code, msgs[code], literal_ok):
            return upd
        self.fixed_strings.add(id(orig))
        if new == "DEV":
            return self.dev().with_changes(lpar=upd.lpar, rpar=upd.rpar)
        if new == "DEVIDX":
            return self.torch_expr(f"torch.device(DEVICE.type, {v[5:] if v else 0})").with_changes(
                lpar=upd.lpar, rpar=upd.rpar
            )
        if new == "TYPE":
            return self.dev_type().with_changes(lpar=upd.lpar, rpar=upd.rpar)
        self.st.needs_device = True
        typ = cst.FormattedStringExpression(expression=_expr(f"{self.D}.type"))
        if isinstance(upd, cst.FormattedString):
            p0 = upd.parts[0]
            assert isinstance(p0, cst.FormattedStringText)
            rest = p0.value[4:]
            parts = [typ, *([cst.FormattedStringText(rest)] if rest else []), *upd.parts[1:]]
            return upd.with_changes(parts=parts)
        assert isinstance(upd, cst.SimpleString)
        raw = upd.raw_value[4:].replace("{", "{{").replace("}", "}}")
        prefix = upd.prefix.replace("u", "").replace("U", "")
        return cst.FormattedString(
            parts=[typ, *([cst.FormattedStringText(raw)] if raw else [])],
            start=f"{prefix}f{upd.quote}", end=upd.quote, lpar=upd.lpar, rpar=upd.rpar,
        )  # fmt: skip

    def _nccl_literal(self, orig: cst.SimpleString, upd: cst.SimpleString, role: str) -> cst.BaseExpression:
        if role == "cmp":
            self.report(orig, "BU131", 'compares a backend with "nccl" (CUDA-only): compare with '
                        f"torch.distributed.get_default_backend_for_device({self.D})", False)  # fmt: skip
            return upd
        if role not in ("backend", "value"):
            return upd
        msg = (
            f'process-group backend "nccl" is CUDA-only: use torch.distributed.get_default_backend_for_device({self.D})'
        )
        if not self.report(orig, "BU131", msg, True):
            return upd
        self.st.needs_device = True
        return self.torch_expr("torch.distributed.get_default_backend_for_device(DEVICE)").with_changes(
            lpar=upd.lpar, rpar=upd.rpar
        )

    # -- calls
    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        func = original_node.func
        qn = self.qname(func)
        if qn is not None and (qn == "torch.cuda" or qn.startswith("torch.cuda.")):
            return self._cuda_call(original_node, updated_node, qn)
        if (
            qn == "torch.device"
            and len(original_node.args) == 1
            and id(original_node.args[0].value) in self.fixed_strings
        ):
            # torch.device("cuda") -> DEVICE
            if cst.Module([]).code_for_node(updated_node.args[0].value) == f"{self.D}.type":
                return self.dev().with_changes(lpar=updated_node.lpar, rpar=updated_node.rpar)
        if qn is not None and qn.startswith(("torch.backends.cuda.", "torch.backends.cudnn.")):
            self._backend_ref(func, qn)
            return updated_node
        if qn in ("os.environ.setdefault", "os.putenv", "os.environ.__setitem__", "os.environ.update"):
            self._env_call(original_node, qn)
            return updated_node
        if _method(func, qn) is not None:
            assert isinstance(func, cst.Attribute)
            if func.attr.value == "cuda":
                return self._dot_cuda(original_node, updated_node)
            if func.attr.value == "pin_memory" and original_node.args:
                msg = "pin_memory(device=...) names a CUDA device (and is deprecated): use pin_memory()"
                if self.report(func.attr, "BU105", msg, True):
                    return updated_node.with_changes(args=())
        return updated_node

    def _dot_cuda(self, orig: cst.Call, upd: cst.Call) -> cst.BaseExpression:
        assert isinstance(orig.func, cst.Attribute) and isinstance(upd.func, cst.Attribute)
        if any(a.star for a in orig.args):
            self.report(orig.func.attr, "BU101", f".cuda(*args) moves to CUDA only: rewrite as .to({self.D}, ...) "
                        "with the device argument mapped by hand", False)  # fmt: skip
            return upd
        obj = orig.func.value
        if isinstance(obj, cst.Call) and isinstance(obj.func, cst.Name) and obj.func.value == "super":
            self.report(orig.func.attr, "BU101", "super().cuda() in an override: forward to "
                        f"super().to({self.D}) by hand if the override's meaning allows", False)  # fmt: skip
            return upd
        dev_arg = _find_arg(upd.args, 0, "device")
        orig_dev = _find_arg(orig.args, 0, "device")
        if dev_arg is not None and isinstance(dev_arg.value, cst.Integer):
            what = f"torch.device({self.D}.type, {dev_arg.value.value})"
        elif orig_dev is not None and not (isinstance(orig_dev.value, cst.Name) and orig_dev.value.value == "None"):
            what = cst.Module([]).code_for_node(orig_dev.value)
        else:
            what = self.D
        if not self.report(orig.func.attr, "BU101", f".cuda() moves to CUDA only: use .to({what})", True):
            return upd
        rest: list[cst.Arg] = []
        positional = [a for a in upd.args if a.keyword is None and not a.star]
        for a in upd.args:
            if a is dev_arg:
                continue
            if a.keyword is None and not a.star and len(positional) > 1 and a is positional[1]:
                rest.append(_kw("non_blocking", a))
            else:
                rest.append(a)
        if dev_arg is None or (isinstance(dev_arg.value, cst.Name) and dev_arg.value.value == "None"):
            first = _arg(self.dev())
        elif isinstance(dev_arg.value, cst.Integer):
            first = _arg(self.torch_expr(f"torch.device(DEVICE.type, {dev_arg.value.value})"))
        else:
            first = _positional(dev_arg)
        args = _comma_list([first, *rest], _trailing(upd.args))
        return upd.with_changes(func=upd.func.with_changes(attr=cst.Name("to")), args=args)

    def _cuda_call(self, orig: cst.Call, upd: cst.Call, qn: str) -> cst.BaseExpression:
        name = qn[len("torch.cuda.") :] if qn != "torch.cuda" else ""
        fn = CUDA_FNS.get(name)
        node = orig.func
        if fn is None:
            code, msg = self._cuda_other(name)
            self.report(node, code, msg, False)
            return upd
        old = f"torch.cuda.{name}"
        if fn.target is None:
            if name == "device" and len(orig.args) == 1 and isinstance(orig.args[0].value, cst.Integer):
                if self.report(node, "BU110", f"{old}(i) is CUDA-only: use torch.accelerator.device_index(i)", True):
                    self._drop_import(orig.func, qn)
                    return upd.with_changes(func=self.torch_expr("torch.accelerator.device_index"))
                return upd
            self.report(node, fn.code, f"{old} is CUDA-only: {fn.manual}", False)
            return upd
        new = f"torch.{fn.target}"
        args = list(upd.args)
        stars = {a.star for a in args if a.star}
        if ("**" in stars and fn.device_kw) or ("*" in stars and name == "amp.autocast"):
            self.report(node, fn.code, f"{old}() with *args/**kwargs is CUDA-only: map the arguments to "
                        f"torch.{fn.target}() by hand", False)  # fmt: skip
            return upd
        if name == "Event":
            names = ("enable_timing", "blocking", "interprocess", "external")
            pos = [a for a in args if a.keyword is None]
            if (
                len(pos) > 3
                or any(a.star for a in args)
                or any(a.keyword is not None and a.keyword.value == "external" for a in args)
            ):
                self.report(node, "BU112", f"{old}(external=...) has no device-generic form: use torch.Event "
                            "for the others", False)  # fmt: skip
                return upd
            args = [(_kw(names[i], a) if a.keyword is None else a) for i, a in enumerate(args)]
        elif name == "Stream":
            if (
                any(a.star for a in args)
                or any(a.keyword is not None and a.keyword.value not in ("device", "priority") for a in args)
                or len([a for a in args if a.keyword is None]) > 2
            ):
                self.report(node, "BU112", f"{old}(...) with these arguments: rewrite by hand to "
                            "torch.Stream(device, priority=p)", False)  # fmt: skip
                return upd
            dev = _find_arg(args, 0, "device")
            pri = _find_arg(args, 1, "priority")
            args = [*([_positional(dev)] if dev else []), *([_kw("priority", pri)] if pri else [])]
        elif name == "amp.autocast":
            names = ("enabled", "dtype", "cache_enabled")
            pos_i = 0
            new_args = [_arg(self.dev_type())]
            for a in args:
                if a.keyword is None and not a.star:
                    new_args.append(_kw(names[pos_i], a) if pos_i < len(names) else a)
                    pos_i += 1
                else:
                    new_args.append(a)
            args = new_args
        elif name == "amp.GradScaler":
            args = [_arg(self.dev_type()), *args]
        elif name in ("amp.custom_fwd", "amp.custom_bwd"):
            pos = [a for a in args if a.keyword is None]
            kws = [a for a in args if a.keyword is not None]
            args = [*pos, _arg(self.dev_type(), "device_type"), *kws]
        elif fn.device_kw:
            args = [(_positional(a) if a.keyword is not None and a.keyword.value == "device" else a) for a in args]
        what = {"amp.autocast": f"torch.autocast({self.D}.type, ...)",
                "amp.GradScaler": f"torch.amp.GradScaler({self.D}.type, ...)",
                "amp.custom_fwd": f"torch.amp.custom_fwd(device_type={self.D}.type)",
                "amp.custom_bwd": f"torch.amp.custom_bwd(device_type={self.D}.type)"}.get(name, f"{new}()")  # fmt: skip
        extra = " (guarded by torch.accelerator.is_available(), as torch.cuda was a no-op without CUDA)" if (
            fn.guard is not None) else ""  # fmt: skip
        if not self.report(node, fn.code, f"{old}() is CUDA-only: use {what}{extra}", True):
            return upd
        self._drop_import(orig.func, qn)
        call = upd.with_changes(func=self.torch_expr(new), args=_comma_list(args, _trailing(upd.args)) if args else ())
        if fn.guard is None:
            return call
        if self._under_availability_check(orig):
            return call
        test = self.torch_expr("torch.accelerator.is_available()")
        stmt = self._whole_statement(orig)
        if stmt is not None:
            self.guard_stmts[id(stmt)] = test
            return call
        return cst.IfExp(test=test, body=call, orelse=_expr(fn.guard), lpar=[cst.LeftParen()], rpar=[cst.RightParen()])

    def _under_availability_check(self, node: cst.CSTNode) -> bool:
        """Inside the body of `if torch.cuda.is_available():` (or torch.accelerator's): no second guard."""
        child, p = node, self.parent(node)
        while p is not None and not isinstance(p, (cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.Module)):
            if isinstance(p, cst.If) and p.body is child:
                t = p.test
                if (
                    isinstance(t, cst.Call)
                    and not t.args
                    and self.qname(t.func) in ("torch.cuda.is_available", "torch.accelerator.is_available")
                ):
                    return True
            child, p = p, self.parent(p)
        return False

    def _whole_statement(self, call: cst.Call) -> cst.SimpleStatementLine | None:
        p = self.parent(call)
        if not isinstance(p, cst.Expr) or call.lpar:
            return None
        line = self.parent(p)
        if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1:
            return line
        return None

    def leave_SimpleStatementLine(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.BaseStatement:
        test = self.guard_stmts.get(id(original_node))
        if test is None:
            return updated_node
        inner = updated_node.with_changes(leading_lines=())
        return cst.If(test=test, body=cst.IndentedBlock(body=[inner]), leading_lines=updated_node.leading_lines)

    def _cuda_other(self, name: str) -> tuple[str, str]:
        old = f"torch.cuda.{name}" if name else "torch.cuda"
        if name in _RNG:
            return "BU113", f"{old} is CUDA-only: " + _RNG_HINT.get(
                name, "torch.manual_seed / torch.get_rng_state cover cpu; accelerators: "
                "torch.get_device_module(DEVICE) where the backend has it").replace("DEVICE", self.D)  # fmt: skip
        if name in _PROPS:
            return "BU114", f"{old} is CUDA-only: " + _PROP_HINT.get(
                name, "query the backend via torch.get_device_module(DEVICE) or torch.accelerator"
            ).replace("DEVICE", self.D)
        if "memory" in name.lower() or "alloc" in name.lower() or name in _MEMORY:
            return (
                "BU111",
                f"{old} is CUDA-only: no device-generic equivalent; keep it behind "
                "`if torch.accelerator.is_available()` or use torch.accelerator's memory functions",
            )
        if name == "nvtx" or name.startswith("nvtx."):
            return "BU115", f"{old} (NVTX) is CUDA-only: use torch.profiler.record_function(name)"
        if name in _GRAPHS:
            return (
                "BU116",
                f"{old} (CUDA graphs) is CUDA-only: torch.accelerator.Graph (torch >= 2.13) "
                'where the backend supports graphs, or torch.compile(mode="reduce-overhead")',
            )
        if name.endswith("Tensor") or name.endswith("Storage"):
            return (
                "BU118",
                f"{old} (legacy CUDA tensor type) is CUDA-only: use torch.empty(..., dtype=..., "
                f"device={self.D}) / torch.set_default_device({self.D})",
            )
        return (
            "BU119",
            f"{old} is CUDA-only: use torch.get_device_module({self.D}).{name or '<name>'} where the "
            "backend provides it, or a torch.accelerator API",
        )

    def _drop_import(self, func: cst.BaseExpression, qn: str) -> None:
        """After rewriting a call through a from-import (`from torch.cuda import synchronize`), drop the
        import if nothing else uses it."""
        base = func
        while isinstance(base, cst.Attribute):
            base = base.value
        if not isinstance(base, cst.Name):
            return
        for q in self.qnames(base):
            mod, _, obj = q.name.rpartition(".")
            if q.source == QualifiedNameSource.IMPORT and mod.startswith("torch") and q.name != "torch":
                asname = None if base.value == obj else base.value
                RemoveImportsVisitor.remove_unused_import(self.context, mod, obj, asname)  # from mod import obj
                if asname is not None:  # import torch.cuda as tc
                    RemoveImportsVisitor.remove_unused_import(self.context, q.name, None, asname)

    # -- references that are not calls
    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute) -> cst.BaseExpression:
        if not self.is_maximal(original_node):
            return updated_node
        if isinstance(self.parent(original_node), cst.Call) and self.parent(original_node).func is original_node:
            return updated_node
        if original_node.attr.value == "is_cuda" and self.qname(original_node) is None:
            self.report(original_node.attr, "BU106", ".is_cuda is true only on CUDA tensors: test "
                        f'`t.device.type == {self.D}.type` (or `!= "cpu"`)', False)  # fmt: skip
            return updated_node
        return self._reference(original_node, updated_node)

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.BaseExpression:
        p = self.parent(original_node)
        if isinstance(p, cst.Attribute) or (isinstance(p, cst.Call) and p.func is original_node):
            return updated_node
        return self._reference(original_node, updated_node)

    def _reference(self, orig: cst.BaseExpression, upd: cst.BaseExpression) -> cst.BaseExpression:
        qn = self.qname(orig)
        if qn is None:
            return upd
        if qn.startswith(("torch.backends.cuda", "torch.backends.cudnn")):
            self._backend_ref(orig, qn)
            return upd
        if qn == "os.environ":
            return upd
        if not (qn == "torch.cuda" or qn.startswith("torch.cuda.")):
            return upd
        name = qn[len("torch.cuda.") :] if qn != "torch.cuda" else ""
        if name == "":
            msg = f"the torch.cuda module is CUDA-only: use torch.get_device_module({self.D})"
            if self.report(orig, "BU119", msg, True):
                self._drop_import(orig, qn)
                return self.torch_expr("torch.get_device_module(DEVICE)").with_changes(lpar=upd.lpar, rpar=upd.rpar)
            return upd
        fn = CUDA_FNS.get(name)
        if (
            fn is not None
            and name in ("amp.custom_fwd", "amp.custom_bwd")
            and isinstance(self.parent(orig), cst.Decorator)
        ):
            new = f"torch.{fn.target}(device_type={self.D}.type)"
            if self.report(orig, fn.code, f"@torch.cuda.{name} is CUDA-only: use @{new}", True):
                self._drop_import(orig, qn)
                self.st.needs_device = True
                return self.torch_expr(f"torch.{fn.target}(device_type=DEVICE.type)")
            return upd
        if fn is not None and fn.ref_ok and fn.target is not None:
            new = f"torch.{fn.target}"
            if self.report(orig, fn.code, f"torch.cuda.{name} is CUDA-only: use {new}", True):
                self._drop_import(orig, qn)
                return self.torch_expr(new).with_changes(lpar=upd.lpar, rpar=upd.rpar)
            return upd
        if fn is not None:
            hint = fn.manual or (f"pass torch.{fn.target} (positional device argument)" if fn.target else "")
            self.report(orig, fn.code, f"torch.cuda.{name} is CUDA-only: {hint}", False)
            return upd
        code, msg = self._cuda_other(name)
        self.report(orig, code, msg, False)
        return upd

    def _backend_ref(self, node: cst.CSTNode, qn: str) -> None:
        hint = ('for TF32 use torch.set_float32_matmul_precision("high")' if qn.endswith("allow_tf32")
                else "mark a deliberate one `# cuda-ok`")  # fmt: skip
        self.report(node, "BU130", f"{qn} is a CUDA-only switch (no effect elsewhere): {hint}", False)

    # -- environment variables
    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        t = node.target
        if isinstance(t, cst.Subscript) and self.qname(t.value) == "os.environ" and len(t.slice) == 1:
            sl = t.slice[0].slice
            if isinstance(sl, cst.Index):
                self._env(t, _str_value(sl.value))

    def _env_call(self, call: cst.Call, qn: str) -> None:
        if qn == "os.environ.update":
            for a in call.args:
                if a.keyword is not None:
                    self._env(a, a.keyword.value)
                elif isinstance(a.value, cst.Dict):
                    for el in a.value.elements:
                        if isinstance(el, cst.DictElement):
                            self._env(el, _str_value(el.key))
            return
        if call.args:
            self._env(call, _str_value(call.args[0].value))

    def _env(self, node: cst.CSTNode, var: str | None) -> None:
        if var is None or not _ENV_RE.match(var):
            return
        hint = _ENV_HINT.get(var, "a CUDA-only setting: other backends ignore it; set the backend's own if any")
        self.report(node, "BU132", f"sets {var}: {hint}", False)


def _collect_names(node: cst.CSTNode) -> list[cst.Name]:
    out: list[cst.Name] = []

    class V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            out.append(n)

    node.visit(V())
    return out


def _torch_aliases(stmt: cst.CSTNode) -> list[str]:
    """Names a top-level import line binds to the torch package (`import torch`, `import torch.nn`,
    `import torch as th`)."""
    out: list[str] = []
    for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
        if isinstance(small, cst.Import):
            for al in small.names:
                full = cst.Module([]).code_for_node(al.name)
                if al.asname is None and (full == "torch" or full.startswith("torch.")):
                    out.append("torch")
                elif al.asname is not None and full == "torch":
                    out.append(cst.Module([]).code_for_node(al.asname.name))
    return out


def _is_docstring(stmt: cst.CSTNode) -> bool:
    return (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr)
            and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString)))  # fmt: skip


def _is_import_line(stmt: cst.CSTNode) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(
        isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body
    )


def _device_assignment(stmt: cst.CSTNode) -> str | None:
    """The name of an earlier `NAME = <torch>.accelerator.current_accelerator(...) or <torch>.device("cpu")`."""
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign)):
        return None
    a = stmt.body[0]
    if len(a.targets) != 1 or not isinstance(a.targets[0].target, cst.Name):
        return None
    code = re.sub(r"\s+", "", cst.Module([]).code_for_node(a.value)).replace("'", '"')
    if re.fullmatch(r"\w+\.accelerator\.current_accelerator\((check_available=True)?\)or\w+\.device\(\"cpu\"\)", code):
        return a.targets[0].target.value
    return None


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
