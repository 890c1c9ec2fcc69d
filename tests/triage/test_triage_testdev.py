"""`bringup triage` on a wrong device: sweeps on testdev (docs/testdev.md) of six small user models in two
families of three (tests/triage/triage_models.py), each family one architecture at three sizes.

- two numeric faults (`scale:silu=1.01,scale:gelu=1.01`): exactly two groups, one per fault, each localized to its
  op, each repro failing on the faulty device (exit 1) and passing on cpu (exit 0), checked again here in fresh
  processes;
- a compile failure (tests/triage/lowering_gap.py: the device's compiler has no lowering for silu) and a CPU
  fallback (the gelu family runs through testdev's fallback): each one group across its three models, the
  compile repro PyTorch's minifier wrote, the fallback repro the ops with their recorded shapes; both fail on
  testdev and pass on cpu;
- the bug block is in summary.json and on the scorecard (a Bugs section above the per-model table) without triage.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.bisect.fakeplugin import versions, write_wheels
from tests.conftest import load_json
from tests.testdev.conftest import testdev_built  # noqa: F401  (the fixture)
from tests.triage.triage_models import MODELS

HERE = Path(__file__).resolve().parent
TD = ("--import", "bringup.testdev", "--device", "testdev")


def _env(**extra: str) -> dict[str, str]:
    return {"PYTHONPATH": f"{HERE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", **extra}


def _sweep(cli, tmp: Path, env: dict[str, str], *extra: str, imports: tuple[str, ...] = ()) -> dict:
    (tmp / "models.txt").write_text("".join(f"triage_models:{m}\n" for m in MODELS))
    p = cli(
        *TD,
        *(a for m in imports for a in ("--import", m)),
        "--workers",
        "2",
        "zoo",
        "--source",
        "models.txt",
        "--steps",
        "2",
        "--noise-seeds",
        "0",
        *extra,
        "--json",
        "sweep.json",
        env=env,
        timeout=900,
    )
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-3000:]
    return load_json(tmp / "sweep.json")


def _triage(
    cli, tmp: Path, env: dict[str, str], *imports: str, extra: tuple[str, ...] = ()
) -> tuple[subprocess.CompletedProcess[str], Path]:
    args = [a for m in imports for a in ("--import", m)]
    p = cli("--import", "bringup.testdev", *args, "--workers", "2", "triage", *extra, env=env, timeout=900)
    out = next((tmp / "bringup-results").glob("*/triage"))
    return p, out


def _run(script: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("BRINGUP_TESTDEV_FAULTS", "TRIAGE_LOWERING_GAP")}
    return subprocess.run(
        [sys.executable, str(script), *args],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=300,
        cwd=script.parent,
    )


def test_two_numeric_faults_are_two_groups_with_checked_repros(cli, tmp_path: Path, testdev_built: None) -> None:  # noqa: F811
    fault = _env(BRINGUP_TESTDEV_FAULTS="scale:silu=1.01,scale:gelu=1.01")
    data = _sweep(cli, tmp_path, fault, "--compile-backend", "eager")
    assert {c["status"] for c in data["cases"]} == {"fail_numeric"}
    bugs = data["bugs"]  # the post-run step's block, without triage: two groups at module level
    assert [g["reach"]["models"] for g in bugs["groups"]] == [3, 3]
    assert {g["parts"]["module_kind"] for g in bugs["groups"]} == {"SiLU", "GELU"}
    assert cli("report").returncode == 0  # the scorecard, from the store
    page = next((tmp_path / "bringup-results").glob("*/report.html")).read_text()
    assert page.index('id="sec-bugs"') < page.index('id="sec-zoo"')  # above the per-model table

    p, out = _triage(cli, tmp_path, fault)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-3000:]
    block = load_json(out / "triage.json")
    groups = {g["parts"]["op"]: g for g in block["groups"]}
    assert sorted(groups) == ["aten::gelu", "aten::silu"], [g["key"] for g in block["groups"]]
    for op, g in groups.items():
        family = op.split("::")[1]
        assert sorted(g["models"]) == sorted(f"triage_models:{m}" for m in MODELS if m.startswith(family))
        assert g["repro"]["verdict"] == "checked", g["repro"]
        md = (out / g["issue"]).read_text()
        assert f"wrong numbers: {op}" in md and "## Repro" in md and "collect_env" in md
        assert str(tmp_path) not in md and not re.search(r"/tmp/pytest", md)  # pastes into an issue as is
        script = Path(g["repro"]["script"])
        on_device = _run(script, fault)
        assert on_device.returncode == 1 and f"signature: {g['key']}" in on_device.stdout, on_device.stdout
        assert _run(script, _env(), "--device", "cpu").returncode == 0
        assert _run(script, _env()).returncode == 0  # a correct testdev: no mismatch either
    assert "| 1 |" in (out / "README.md").read_text()


def test_a_compile_failure_and_a_fallback_are_each_one_group(cli, tmp_path: Path, testdev_built: None) -> None:  # noqa: F811
    env = _env(TRIAGE_LOWERING_GAP="silu")
    data = _sweep(cli, tmp_path, env, "--compile-backend", "lowering_gap", imports=("lowering_gap",))
    statuses = {c["name"].split(":")[1]: c["status"] for c in data["cases"]}
    assert statuses == {m: ("fail_compile" if m.startswith("silu") else "fallback") for m in MODELS}
    kinds = sorted((g["kind"], g["reach"]["models"]) for g in data["bugs"]["groups"])
    assert kinds == [("compile", 3), ("fallback", 3)]

    # with --bisect over two fake candidates (tests/bisect/fakeplugin.py) that see this torch (--inherit-site):
    # each group's repro bisected for its own verdict and signature
    write_wheels(tmp_path / "wheels", versions(2), fault_from="9.9.9")
    bisect = ("--bisect", "--wheels", str(tmp_path / "wheels"), "--inherit-site", "--env-cache", str(tmp_path / "envs"))
    p, out = _triage(cli, tmp_path, {**env, "PIP_NO_INDEX": "1"}, "lowering_gap", extra=bisect)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-3000:]
    block = load_json(out / "triage.json")
    by_kind = {g["kind"]: g for g in block["groups"]}
    comp, fb = by_kind["compile"], by_kind["fallback"]
    assert comp["parts"]["exception"] == "LoweringError" and "aten::silu" in comp["parts"]["message"]
    assert comp["repro"]["verdict"] == "checked" and "minifier" in comp["repro"]["how"]
    minified = Path(comp["repro"]["script"]).read_text()
    assert "run_repro(" in minified and "import lowering_gap" in minified and str(tmp_path) not in minified
    assert _run(Path(comp["repro"]["script"]), env).returncode != 0
    assert _run(Path(comp["repro"]["script"]).with_name("repro_cpu.py"), env).returncode == 0
    # bisected through torch.compile (bisect_target.py runs the minified repro so): the traceback's exception key
    # is the group's, so the candidates are fail_compile (not "error"), the old endpoint already
    assert comp["bisect"]["result"] == "endpoint_unusable", comp["bisect"]
    assert "the old endpoint is already fail_compile" in comp["bisect"]["message"]
    assert fb["bisect"]["result"] == "endpoint_unusable" and "already fallback" in fb["bisect"]["message"]
    assert "## Bisection" in (out / comp["issue"]).read_text()
    assert any(op.startswith("aten::gelu[") for op in fb["parts"]["ops"])
    assert fb["repro"]["verdict"] == "checked"
    script = Path(fb["repro"]["script"])
    on_device = _run(script, env)
    assert on_device.returncode == 1 and "aten::gelu[float32]" in on_device.stdout
    assert "ran through the CPU fallback" in on_device.stdout
    assert _run(script, env, "--device", "cpu").returncode == 0
