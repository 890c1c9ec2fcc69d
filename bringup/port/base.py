"""The codemod's base: one libcst transformer's state and helpers (parents, lazily resolved positions
and qualified names, `report`, the module's torch alias and device name) and the module-level edits
(`import torch`, the `DEVICE = ...` line after the imports). The rule families are mixins on it
(`literals.py`, `calls.py`, `refs.py`); `codemod.py` composes them and drives one module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import libcst as cst
from libcst._metadata_dependent import LazyValue
from libcst.codemod import CodemodContext, ContextAwareTransformer
from libcst.codemod.visitors import RemoveImportsVisitor
from libcst.metadata import PositionProvider, QualifiedNameProvider, QualifiedNameSource

from bringup.port.cst_helpers import (
    collect_names,
    device_assignment,
    is_docstring,
    is_import_line,
    parse_expr,
    str_value,
    torch_aliases,
)
from bringup.port.names import ENV_HINT, ENV_RE, Hit, normalize
from bringup.port.rules import DEVICE_NAME, DEVICE_NAME_FALLBACKS

DEVICE_COMMENT = "# the accelerator (cuda, xpu, mps, ...) or cpu: added by bringup port"


@dataclass
class _State:
    hits: list[Hit] = field(default_factory=list)
    fixed: int = 0
    needs_device: bool = False
    needs_torch: bool = False


class CodemodBase(ContextAwareTransformer):
    """State and helpers every rule family uses; the module head (torch alias, device name, where new
    lines go). Metadata is resolved lazily - qualified names on the first lookup, positions on the
    first finding - since libcst's providers dominate the cost."""

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
        return parse_expr(f"{self.D}.type")

    def torch_expr(self, code: str) -> cst.BaseExpression:
        """An expression over the module's torch alias (`torch.x` -> `th.x`)."""
        self.st.needs_torch = True
        if "DEVICE" in code:
            self.st.needs_device = True
        return parse_expr(code.replace("torch.", f"{self.T}.").replace("DEVICE", self.D))

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
        names = {n.value for n in collect_names(node)}
        head = 0
        for i, stmt in enumerate(node.body):
            if is_docstring(stmt) and i == 0 or is_import_line(stmt):
                head = i + 1
                continue
            break
        self.head_len = head
        # where the module binds torch at top level: the first such import line (and its alias)
        for i, stmt in enumerate(node.body):
            aliases = torch_aliases(stmt)
            if aliases:
                self.T, self.head_binds_torch = ("torch" if "torch" in aliases else aliases[0]), True
                # after the head, or right after that import when it comes later (after a sys.path or
                # os.environ line, say): the module's own import order is kept
                self.head_len = max(head, i + 1)
                break
        for stmt in node.body:
            name = device_assignment(stmt)
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
        add: list[cst.SimpleStatementLine | cst.BaseCompoundStatement] = []
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

    # -- shared by the rule families
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

    def _backend_ref(self, node: cst.CSTNode, qn: str) -> None:
        hint = (
            'for TF32 use torch.set_float32_matmul_precision("high")'
            if qn.endswith("allow_tf32")
            else "mark a deliberate one `# cuda-ok`"
        )
        self.report(node, "BU130", f"{qn} is a CUDA-only switch (no effect elsewhere): {hint}", False)

    def _env_call(self, call: cst.Call, qn: str) -> None:
        if qn == "os.environ.update":
            for a in call.args:
                if a.keyword is not None:
                    self._env(a, a.keyword.value)
                elif isinstance(a.value, cst.Dict):
                    for el in a.value.elements:
                        if isinstance(el, cst.DictElement):
                            self._env(el, str_value(el.key))
            return
        if call.args:
            self._env(call, str_value(call.args[0].value))

    def _env(self, node: cst.CSTNode, var: str | None) -> None:
        if var is None or not ENV_RE.match(var):
            return
        hint = ENV_HINT.get(var, "a CUDA-only setting: other backends ignore it; set the backend's own if any")
        self.report(node, "BU132", f"sets {var}: {hint}", False)
