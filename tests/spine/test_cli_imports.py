"""The command line answers at once: `bringup --help`, every `bringup COMMAND [ACTION] --help` and an
argument error build and run the parser without importing torch (or transformers, timm, numpy).

What is imported is tested, not how long it takes (timings live in bench/cli_latency.py): one fresh
interpreter runs the real `bringup.cli.main` on each argument list and reports what `sys.modules` holds.
"""

from __future__ import annotations

import json
import subprocess
import sys

from bringup.api import commands, get_suite
from tests.conftest import REPO

HEAVY = ("torch", "transformers", "timm", "numpy")

# One interpreter: the help of the top level, of every command and of every command's actions (hub
# plan ...), then two argument errors. main() is the console script's entry point (pyproject.toml).
_PROBE = r"""
import contextlib, io, json, sys
from bringup.cli import build_parser, main

HEAVY = %r
def sub_choices(p):
    for a in p._actions:
        if a.__class__.__name__ == "_SubParsersAction":
            return dict(a.choices)
    return {}

argvs = [["--help"]]
for name, sp in sub_choices(build_parser()).items():
    argvs.append([name, "--help"])
    argvs += [[name, action, "--help"] for action in sub_choices(sp)]
argvs += [["smoke", "--devcie", "cpu"], ["--devcie", "cpu", "smoke"], ["zoo", "--size", "huge"]]
out = []
for argv in argvs:
    so, se = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(so), contextlib.redirect_stderr(se):
        try:
            rc = main(argv)
        except SystemExit as e:
            rc = e.code
    out.append({"argv": argv, "rc": rc, "stdout": so.getvalue(), "stderr": se.getvalue(),
                "heavy": [m for m in HEAVY if m in sys.modules]})
print(json.dumps(out))
"""


def test_help_and_argument_errors_import_no_torch() -> None:
    p = subprocess.run([sys.executable, "-c", _PROBE % (HEAVY,)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    rows = json.loads(p.stdout)
    helps = [r for r in rows if r["argv"][-1] == "--help"]
    names = {r["argv"][0] for r in helps if len(r["argv"]) == 2}
    # every built-in suite and command has its help here, and hub's actions theirs
    assert {"smoke", "probe", "train", "flex", "zoo", "ops", "profile", "selftest", "run", "hub"} <= names, names
    assert any(r["argv"][:2] == ["hub", "plan"] for r in helps)
    for r in helps:
        assert r["rc"] == 0 and r["stdout"].startswith("usage: bringup"), r
    for r in rows:
        if r["argv"][-1] != "--help":
            assert r["rc"] == 2, r
            lines = [ln for ln in r["stderr"].splitlines() if ln.strip()]
            assert len(lines) == 1 and lines[0].startswith("bringup: error: "), r
    # imports accumulate in one interpreter: the last row saw everything every parse imported
    assert rows[-1]["heavy"] == [], f"parsing imported {rows[-1]['heavy']}"


def test_the_faces_are_what_the_suites_register() -> None:
    """The parser reads each built-in suite's torch-free face (api.commands(), from api.BUILTIN_ARGS); the
    suite registers the same help, options and order (Suite.from_face), so `bringup --help` and the
    registry cannot drift apart."""
    faces = commands()
    names = {c.name for c in faces}
    assert {"smoke", "probe", "train", "flex", "zoo", "ops", "profile", "selftest", "localize"} <= names, names
    for face in faces:
        suite = get_suite(face.name)
        assert suite is not None and suite.command, face.name
        assert (face.help, face.add_arguments, face.order) == (suite.help, suite.add_arguments, suite.order), face.name


def test_device_after_the_subcommand() -> None:
    """`bringup smoke --device cpu` (the common first try) means `bringup --device cpu smoke`; given on
    both sides, the later one wins; commands that never touch a device don't take it."""
    from bringup.cli import build_parser

    p = build_parser()
    assert p.parse_args(["smoke", "--device", "cpu"]).device == "cpu"
    assert p.parse_args(["--device", "cpu", "smoke"]).device == "cpu"
    assert p.parse_args(["--device", "a", "run", "--quick", "--device", "b"]).device == "b"
    assert p.parse_args(["smoke"]).device is None
    assert "--device" not in p.format_help().split("COMMAND ...")[1].split("options:")[0]


def test_torch_own_backends_plan_without_dynamo_and_other_names_are_checked() -> None:
    """Planning a compiled run with inductor / aot_eager / eager imports no torch._dynamo (the worker compiles,
    not the command's process); any other name is checked against dynamo's registry, and a wrong one is refused."""
    code = (
        "import sys\nfrom bringup.errors import BadInput\n"
        "from bringup.compile_backend import check_compile_backend as c\n"
        "assert [c(n) for n in ('inductor', 'aot_eager', 'eager')] == ['inductor', 'aot_eager', 'eager']\n"
        "print('DYNAMO', 'torch._dynamo' in sys.modules)\n"
        "try:\n    c('no_such_backend')\nexcept BadInput as e:\n    print('REFUSED', e)\n"
    )
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "DYNAMO False" in p.stdout and "REFUSED unknown --compile-backend 'no_such_backend'" in p.stdout, p.stdout
