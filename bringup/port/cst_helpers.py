"""Small libcst helpers of `bringup port`'s codemod: string values, argument lists (keeping the call's
comma style), and what a module's top statements are (docstring, imports, torch aliases, an existing
device variable)."""

from __future__ import annotations

import re
from collections.abc import Sequence

import libcst as cst


def str_value(node: cst.CSTNode) -> str | None:
    if isinstance(node, cst.SimpleString) and "b" not in node.prefix.lower():
        try:
            v = node.evaluated_value
        except Exception:
            return None
        return v if isinstance(v, str) else None
    return None


def is_cuda_str(v: str | None) -> bool:
    return v is not None and (v == "cuda" or v.startswith("cuda:"))


def cuda_fstring(node: cst.CSTNode) -> bool:
    if not isinstance(node, cst.FormattedString) or not node.parts:
        return False
    p0 = node.parts[0]
    return isinstance(p0, cst.FormattedStringText) and (p0.value == "cuda" or p0.value.startswith("cuda:"))


def method_of(func: cst.BaseExpression, qn: str | None) -> str | None:
    """`obj.name(...)` on something that is not a torch API: the method name."""
    if isinstance(func, cst.Attribute) and not (qn or "").startswith("torch."):
        return func.attr.value
    return None


def looks_like_device(node: cst.CSTNode) -> bool:
    if isinstance(node, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString, cst.Tuple, cst.List, cst.Set)):
        return False
    code = cst.Module([]).code_for_node(node).lower()
    return "dev" in code or "backend" in code or code.endswith(".type")


def parse_expr(code: str) -> cst.BaseExpression:
    return cst.parse_expression(code)


def comma_list(args: Sequence[cst.Arg], trailing: cst.Comma | cst.MaybeSentinel) -> list[cst.Arg]:
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


def trailing_comma(args: Sequence[cst.Arg]) -> cst.Comma | cst.MaybeSentinel:
    return args[-1].comma if args and isinstance(args[-1].comma, cst.Comma) else cst.MaybeSentinel.DEFAULT


def as_positional(a: cst.Arg) -> cst.Arg:
    return a.with_changes(keyword=None, equal=cst.MaybeSentinel.DEFAULT)


def kw_arg(name: str, a: cst.Arg) -> cst.Arg:
    return a.with_changes(
        keyword=cst.Name(name),
        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
    )


def new_arg(value: cst.BaseExpression, keyword: str | None = None) -> cst.Arg:
    if keyword is None:
        return cst.Arg(value=value)
    return cst.Arg(
        value=value,
        keyword=cst.Name(keyword),
        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
    )


def find_arg(args: Sequence[cst.Arg], pos: int | None, kw: str | None) -> cst.Arg | None:
    positional = [a for a in args if a.keyword is None and not a.star]
    if pos is not None and pos < len(positional):
        return positional[pos]
    for a in args:
        if a.keyword is not None and a.keyword.value == kw:
            return a
    return None


def collect_names(node: cst.CSTNode) -> list[cst.Name]:
    out: list[cst.Name] = []

    class V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            out.append(n)

    node.visit(V())
    return out


def torch_aliases(stmt: cst.CSTNode) -> list[str]:
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


def is_docstring(stmt: cst.CSTNode) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def is_import_line(stmt: cst.CSTNode) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(
        isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body
    )


def device_assignment(stmt: cst.CSTNode) -> str | None:
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
