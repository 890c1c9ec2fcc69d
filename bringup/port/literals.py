"""Rule family: string literals that name CUDA ("cuda", "cuda:0", f"cuda:{i}", "nccl"). A pre-order pass
gives each string a role from its context (a device argument, a value, a comparison, a backend, an
autocast device type); the post-order pass reports (and with `fix` rewrites) it by that role.
"""

from __future__ import annotations

import re

import libcst as cst

from bringup.port.base import CodemodBase
from bringup.port.cst_helpers import (
    cuda_fstring,
    find_arg,
    is_cuda_str,
    looks_like_device,
    method_of,
    parse_expr,
    str_value,
)
from bringup.port.names import CUDA_FNS, DEV_POS0


class LiteralRules(CodemodBase):
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
        k = str_value(node.key)
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
            and all(is_cuda_str(str_value(el.value)) or str_value(el.value) == "nccl" for el in node.elements)
        ):
            for el in node.elements:
                self.set_role(el.value, role)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        """`x.device.type == "cuda"`, `args.device in ("cuda",)`, `backend == "nccl"`: only when the other
        side looks like a device or a backend (its code says dev.../backend or ends in `.type`)."""
        operands = [node.left, *(c.comparator for c in node.comparisons)]
        if any(looks_like_device(o) for o in operands):
            for o in operands:
                self.set_role(o, "cmp")

    def visit_Call(self, node: cst.Call) -> None:
        qn = self.qname(node.func)
        method = method_of(node.func, qn)
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "format" and self.roles.get(id(node)):
            self.set_role(node.func.value, "str" if self.roles[id(node)] == "dev" else self.roles[id(node)])
        args = node.args
        if qn == "torch.device":
            a = find_arg(args, 0, "type")
            self.set_role(a.value if a else None, "str")
        elif qn in DEV_POS0:
            role, kw = DEV_POS0[qn]
            a = find_arg(args, 0, kw)
            self.set_role(a.value if a else None, role)
        elif qn in ("torch.amp.custom_fwd", "torch.amp.custom_bwd"):
            a = find_arg(args, None, "device_type")
            self.set_role(a.value if a else None, "amp")
        elif qn == "torch.load":
            a = find_arg(args, 1, "map_location")
            self.set_role(a.value if a else None, "dev")
        elif qn is not None and qn.startswith("torch.cuda."):
            name = qn[len("torch.cuda.") :]
            fn = CUDA_FNS.get(name)
            if fn is not None and (fn.device_kw or name == "Stream"):
                a = find_arg(args, 0, "device")
                self.set_role(a.value if a else None, "dev")
        elif method in ("to", "cuda"):
            a = find_arg(args, 0, "device")
            self.set_role(a.value if a else None, "dev")
        elif method in ("startswith", "endswith") and args and isinstance(node.func, cst.Attribute):
            if looks_like_device(node.func.value):
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
        v = str_value(original_node)
        if is_cuda_str(v):
            return self._cuda_literal(original_node, updated_node, role, v or "")
        if v == "nccl":
            return self._nccl_literal(original_node, updated_node, role)
        return updated_node

    def leave_FormattedString(
        self, original_node: cst.FormattedString, updated_node: cst.FormattedString
    ) -> cst.BaseExpression:
        role = self.roles.get(id(original_node))
        if role is None or not cuda_fstring(original_node):
            return updated_node
        return self._cuda_literal(original_node, updated_node, role, None)

    def _cuda_literal(
        self, orig: cst.BaseExpression, upd: cst.BaseExpression, role: str, v: str | None
    ) -> cst.BaseExpression:
        shown = v if v is not None else 'f"cuda:{...}"'
        literal_ok = not isinstance(orig, cst.SimpleString) or orig.raw_value.startswith("cuda")
        if role == "cmp":
            self.report(
                orig,
                "BU104",
                f'compares a device with "{shown}" (true only on CUDA): compare with '
                f'{self.D}.type, or test `.type != "cpu"` for any accelerator',
                False,
            )
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
        msgs = {
            "BU102": f'device "{shown}" is CUDA-only: use {what}',
            "BU103": f'device string "{shown}" is CUDA-only: use {what}',
            "BU122": f'autocast/GradScaler device type "{shown}" is CUDA-only: use {what}',
        }
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
        typ = cst.FormattedStringExpression(expression=parse_expr(f"{self.D}.type"))
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
            start=f"{prefix}f{upd.quote}",
            end=upd.quote,
            lpar=upd.lpar,
            rpar=upd.rpar,
        )

    def _nccl_literal(self, orig: cst.SimpleString, upd: cst.SimpleString, role: str) -> cst.BaseExpression:
        if role == "cmp":
            self.report(
                orig,
                "BU131",
                'compares a backend with "nccl" (CUDA-only): compare with '
                f"torch.distributed.get_default_backend_for_device({self.D})",
                False,
            )
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
