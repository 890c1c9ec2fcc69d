"""Security properties that a grep can keep true: nothing in `bringup/` deserialises with pickle (bundles
are JSON only), every torch.load is `weights_only=True`, YAML is loaded safely, no eval/exec/shell; and
the docs say plainly that `--import` and `module:function` entries run code.

The check is on the AST (a string that mentions `torch.load`, e.g. in the port codemod, is fine). A
deliberate exception is marked on its line with `# security-ok: <reason>` and then shows up in review.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO, run_cli

PKG = REPO / "bringup"
UNSAFE_MODULES = {"pickle", "cPickle", "_pickle", "dill", "cloudpickle", "shelve", "marshal", "joblib"}
SAFE_YAML_LOADERS = {"SafeLoader", "CSafeLoader", "BaseLoader"}


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _kw(call: ast.Call, name: str) -> ast.AST | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _is_true(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def findings(path: Path, root: Path = REPO) -> list[str]:
    src = path.read_text()
    lines = src.splitlines()
    out: list[str] = []

    def flag(node: ast.AST, what: str) -> None:
        line = lines[node.lineno - 1] if 0 < node.lineno <= len(lines) else ""
        if "security-ok:" not in line:
            out.append(f"{path.relative_to(root)}:{node.lineno}: {what}")

    for node in ast.walk(ast.parse(src, filename=str(path))):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in UNSAFE_MODULES:
                    flag(node, f"imports {a.name}")
        elif isinstance(node, ast.ImportFrom):
            if (node.module or "").split(".")[0] in UNSAFE_MODULES:
                flag(node, f"imports from {node.module}")
        elif isinstance(node, ast.Call):
            name = _dotted(node.func)
            last = name.rsplit(".", 1)[-1]
            if name == "torch.load" and not _is_true(_kw(node, "weights_only")):
                flag(node, "torch.load without weights_only=True")
            elif name in ("yaml.load", "yaml.load_all"):
                loader = _dotted(_kw(node, "Loader") or (node.args[1] if len(node.args) > 1 else ast.Constant(None)))
                if loader.rsplit(".", 1)[-1] not in SAFE_YAML_LOADERS:
                    flag(node, f"{name} without a safe Loader (use yaml.safe_load)")
            elif name in ("yaml.unsafe_load", "yaml.full_load", "yaml.unsafe_load_all", "yaml.full_load_all"):
                flag(node, name)
            elif last == "load" and name.split(".")[0] in ("np", "numpy") and _is_true(_kw(node, "allow_pickle")):
                flag(node, "numpy load with allow_pickle=True")
            elif name in ("eval", "exec", "os.system", "os.popen"):
                flag(node, f"{name}()")
            elif name.startswith("subprocess.") and _is_true(_kw(node, "shell")):
                flag(node, f"{name}(shell=True)")
    return out


def test_no_pickle_unsafe_load_eval_or_shell_in_the_package() -> None:
    files = sorted(PKG.rglob("*.py"))
    assert len(files) > 20
    bad = [f for p in files for f in findings(p)]
    assert not bad, "unsafe deserialisation or code execution:\n" + "\n".join(bad)


def test_the_checker_catches_what_it_claims(tmp_path: Path) -> None:
    """The grep test must be able to fail (a test that cannot fail is a defect)."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import pickle\nfrom dill import loads\nimport torch, yaml, numpy as np, subprocess\n"
        "torch.load('m.pt')\ntorch.load('m.pt', weights_only=False)\ntorch.load('m.pt', weights_only=True)\n"
        "yaml.load(s)\nyaml.load(s, Loader=yaml.SafeLoader)\nyaml.safe_load(s)\n"
        "np.load('a.npy', allow_pickle=True)\nnp.load('a.npy')\neval('1')\n"
        "subprocess.run('ls', shell=True)\nsubprocess.run(['ls'])\n"
        "exec('x = 1')  # security-ok: a marked exception\n"
        "s = 'torch.load(f)'\n"
    )
    got = [f.split(": ", 1)[1] for f in findings(probe, root=tmp_path)]
    assert got == [
        "imports pickle",
        "imports from dill",
        "torch.load without weights_only=True",
        "torch.load without weights_only=True",
        "yaml.load without a safe Loader (use yaml.safe_load)",
        "numpy load with allow_pickle=True",
        "eval()",
        "subprocess.run(shell=True)",
    ]


def test_docs_and_help_say_that_import_runs_code(tmp_path: Path) -> None:
    doc = (REPO / "docs" / "reliability.md").read_text()
    assert "`--import MODULE` runs that module's code" in doc
    assert "`module:function`" in doc and "runs code" in doc
    p = run_cli(["--help"], cwd=tmp_path, check_rc=0)
    assert "Runs that module's code" in " ".join(p.stdout.split())
