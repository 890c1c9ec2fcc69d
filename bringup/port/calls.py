"""Rule family: calls. `torch.cuda.<fn>(...)` mapped to torch.accelerator / torch.Event / torch.autocast
(guarded by `torch.accelerator.is_available()` where torch.cuda was a no-op without CUDA), `.cuda(...)`
to `.to(DEVICE, ...)`, `pin_memory(device=...)`, and the calls that set CUDA-only switches or
environment variables.
"""

from __future__ import annotations

import libcst as cst

from bringup.port.base import CodemodBase
from bringup.port.cst_helpers import (
    as_positional,
    comma_list,
    find_arg,
    kw_arg,
    method_of,
    new_arg,
    parse_expr,
    trailing_comma,
)
from bringup.port.names import CUDA_FNS, CudaFn, cuda_other


class CallRules(CodemodBase):
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
        if method_of(func, qn) is not None:
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
            self.report(
                orig.func.attr,
                "BU101",
                f".cuda(*args) moves to CUDA only: rewrite as .to({self.D}, ...) "
                "with the device argument mapped by hand",
                False,
            )
            return upd
        obj = orig.func.value
        if isinstance(obj, cst.Call) and isinstance(obj.func, cst.Name) and obj.func.value == "super":
            self.report(
                orig.func.attr,
                "BU101",
                "super().cuda() in an override: forward to "
                f"super().to({self.D}) by hand if the override's meaning allows",
                False,
            )
            return upd
        dev_arg = find_arg(upd.args, 0, "device")
        orig_dev = find_arg(orig.args, 0, "device")
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
                rest.append(kw_arg("non_blocking", a))
            else:
                rest.append(a)
        if dev_arg is None or (isinstance(dev_arg.value, cst.Name) and dev_arg.value.value == "None"):
            first = new_arg(self.dev())
        elif isinstance(dev_arg.value, cst.Integer):
            first = new_arg(self.torch_expr(f"torch.device(DEVICE.type, {dev_arg.value.value})"))
        else:
            first = as_positional(dev_arg)
        args = comma_list([first, *rest], trailing_comma(upd.args))
        return upd.with_changes(func=upd.func.with_changes(attr=cst.Name("to")), args=args)

    def _cuda_call(self, orig: cst.Call, upd: cst.Call, qn: str) -> cst.BaseExpression:
        name = qn[len("torch.cuda.") :] if qn != "torch.cuda" else ""
        fn = CUDA_FNS.get(name)
        node = orig.func
        if fn is None:
            code, msg = cuda_other(name, self.D)
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
        args = self._generic_args(node, name, fn, list(upd.args))
        if args is None:
            return upd
        return self._generic_call(orig, upd, qn, fn, args)

    def _generic_args(self, node: cst.CSTNode, name: str, fn: CudaFn, args: list[cst.Arg]) -> list[cst.Arg] | None:
        """The call's arguments as its device-generic counterpart takes them (None: reported, rewrite by hand)."""
        old = f"torch.cuda.{name}"
        stars = {a.star for a in args if a.star}
        if ("**" in stars and fn.device_kw) or ("*" in stars and name == "amp.autocast"):
            self.report(
                node,
                fn.code,
                f"{old}() with *args/**kwargs is CUDA-only: map the arguments to torch.{fn.target}() by hand",
                False,
            )
            return None
        if name == "Event":
            return self._event_args(node, old, args)
        if name == "Stream":
            return self._stream_args(node, old, args)
        if name == "amp.autocast":
            names = ("enabled", "dtype", "cache_enabled")
            pos_i = 0
            new_args = [new_arg(self.dev_type())]
            for a in args:
                if a.keyword is None and not a.star:
                    new_args.append(kw_arg(names[pos_i], a) if pos_i < len(names) else a)
                    pos_i += 1
                else:
                    new_args.append(a)
            return new_args
        if name == "amp.GradScaler":
            return [new_arg(self.dev_type()), *args]
        if name in ("amp.custom_fwd", "amp.custom_bwd"):
            pos = [a for a in args if a.keyword is None]
            kws = [a for a in args if a.keyword is not None]
            return [*pos, new_arg(self.dev_type(), "device_type"), *kws]
        if fn.device_kw:
            return [(as_positional(a) if a.keyword is not None and a.keyword.value == "device" else a) for a in args]
        return args

    def _event_args(self, node: cst.CSTNode, old: str, args: list[cst.Arg]) -> list[cst.Arg] | None:
        names = ("enable_timing", "blocking", "interprocess", "external")
        pos = [a for a in args if a.keyword is None]
        if (
            len(pos) > 3
            or any(a.star for a in args)
            or any(a.keyword is not None and a.keyword.value == "external" for a in args)
        ):
            self.report(
                node,
                "BU112",
                f"{old}(external=...) has no device-generic form: use torch.Event for the others",
                False,
            )
            return None
        return [(kw_arg(names[i], a) if a.keyword is None else a) for i, a in enumerate(args)]

    def _stream_args(self, node: cst.CSTNode, old: str, args: list[cst.Arg]) -> list[cst.Arg] | None:
        if (
            any(a.star for a in args)
            or any(a.keyword is not None and a.keyword.value not in ("device", "priority") for a in args)
            or len([a for a in args if a.keyword is None]) > 2
        ):
            self.report(
                node,
                "BU112",
                f"{old}(...) with these arguments: rewrite by hand to torch.Stream(device, priority=p)",
                False,
            )
            return None
        dev = find_arg(args, 0, "device")
        pri = find_arg(args, 1, "priority")
        return [*([as_positional(dev)] if dev else []), *([kw_arg("priority", pri)] if pri else [])]

    def _generic_call(
        self, orig: cst.Call, upd: cst.Call, qn: str, fn: CudaFn, args: list[cst.Arg]
    ) -> cst.BaseExpression:
        """torch.cuda.X(...) -> its device-generic call; one that was a no-op without CUDA guarded by
        torch.accelerator.is_available() (its statement, or an inline conditional)."""
        name = qn[len("torch.cuda.") :]
        new = f"torch.{fn.target}"
        what = {
            "amp.autocast": f"torch.autocast({self.D}.type, ...)",
            "amp.GradScaler": f"torch.amp.GradScaler({self.D}.type, ...)",
            "amp.custom_fwd": f"torch.amp.custom_fwd(device_type={self.D}.type)",
            "amp.custom_bwd": f"torch.amp.custom_bwd(device_type={self.D}.type)",
        }.get(name, f"{new}()")
        extra = (
            " (guarded by torch.accelerator.is_available(), as torch.cuda was a no-op without CUDA)"
            if (fn.guard is not None)
            else ""
        )
        if not self.report(orig.func, fn.code, f"torch.cuda.{name}() is CUDA-only: use {what}{extra}", True):
            return upd
        self._drop_import(orig.func, qn)
        call = upd.with_changes(
            func=self.torch_expr(new), args=comma_list(args, trailing_comma(upd.args)) if args else ()
        )
        if fn.guard is None:
            return call
        if self._under_availability_check(orig):
            return call
        test = self.torch_expr("torch.accelerator.is_available()")
        stmt = self._whole_statement(orig)
        if stmt is not None:
            self.guard_stmts[id(stmt)] = test
            return call
        return cst.IfExp(
            test=test, body=call, orelse=parse_expr(fn.guard), lpar=[cst.LeftParen()], rpar=[cst.RightParen()]
        )

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
