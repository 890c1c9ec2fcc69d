"""Rule family: references that are not calls (`torch.cuda.is_available` passed as a value,
`@torch.cuda.amp.custom_fwd`, `t.is_cuda`, the torch.cuda module itself, torch.backends.cuda/cudnn
switches) and assignments to CUDA-only environment variables (`os.environ["CUDA_VISIBLE_DEVICES"] = ...`).
"""

from __future__ import annotations

import libcst as cst

from bringup.port.base import CodemodBase
from bringup.port.cst_helpers import str_value
from bringup.port.names import CUDA_FNS, cuda_other


class ReferenceRules(CodemodBase):
    # -- references that are not calls
    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute) -> cst.BaseExpression:
        if not self.is_maximal(original_node):
            return updated_node
        if isinstance(up := self.parent(original_node), cst.Call) and up.func is original_node:
            return updated_node
        if original_node.attr.value == "is_cuda" and self.qname(original_node) is None:
            self.report(
                original_node.attr,
                "BU106",
                f'.is_cuda is true only on CUDA tensors: test `t.device.type == {self.D}.type` (or `!= "cpu"`)',
                False,
            )
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
        code, msg = cuda_other(name, self.D)
        self.report(orig, code, msg, False)
        return upd

    # -- environment variables
    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        t = node.target
        if isinstance(t, cst.Subscript) and self.qname(t.value) == "os.environ" and len(t.slice) == 1:
            sl = t.slice[0].slice
            if isinstance(sl, cst.Index):
                self._env(t, str_value(sl.value))
