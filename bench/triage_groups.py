"""Does one injected cause make one group? Sweeps on the test device (bringup/testdev: faults by environment) with k
causes across n = 3k small models (bench/triage_models.py: families of three sizes, one family per cause), then
`bringup triage`: the groups found vs k, each group's models (it must be exactly its family's three), and each
group's repro (checked: fails on the device, passes on cpu).

Scenarios are marked `tuned` (the causes the tests use: silu and gelu scaled, a compile failure on silu, a CPU
fallback family) or `held-out` (causes the grouping was never tuned on: a softmax temperature, an RMSNorm epsilon,
an embedding backward that loses repeated ids, a compile failure on tanh, an embedding family's fallback).

    python bench/triage_groups.py [--only NAME] [--workers 2] [--keep DIR]

Prints one row per scenario and a total; results (sweep and triage JSON) in --keep DIR (default a temp dir).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from triage_models import entries  # noqa: E402


@dataclass(frozen=True)
class Scenario:
    name: str
    kind: str  # tuned | held-out
    causes: dict[str, str]  # family -> what is wrong with it (the expected group's cause)
    faults: str = ""  # BRINGUP_TESTDEV_FAULTS
    gap: str = ""  # TRIAGE_LOWERING_GAP (ops the test backend cannot lower on the device)
    backend: str = "eager"
    expect_kind: dict[str, str] = field(default_factory=dict)  # family -> the group's kind


SCENARIOS = (
    Scenario(
        "silu+gelu scaled", "tuned", {"silu": "scale:silu", "gelu": "scale:gelu"}, "scale:silu=1.01,scale:gelu=1.01"
    ),
    Scenario(
        "compile silu + fallback gelu", "tuned", {"silu": "no silu lowering", "gelu": "gelu family falls back"},
        gap="silu", backend="lowering_gap",
    ),
    Scenario(
        "softmax, rsqrt, embedding", "held-out",
        {"attn": "softmax temperature", "rmsnorm": "norm epsilon", "embed": "repeated ids lost"},
        "arg:_softmax=1.02,shift:rsqrt=1e-3,lastwrite:embedding_dense_backward",
    ),
    Scenario(
        "compile tanh + softmax + fallback embedding", "held-out",
        {"tanh": "no tanh lowering", "attn": "softmax temperature", "embed": "embedding family falls back"},
        "arg:_softmax=1.02", gap="tanh", backend="lowering_gap",
    ),
    Scenario(
        "five at once", "held-out",
        {"silu": "scale:silu", "gelu": "scale:gelu", "attn": "softmax temperature", "rmsnorm": "norm epsilon",
         "tanh": "no tanh lowering"},
        "scale:silu=1.01,scale:gelu=1.01,arg:_softmax=1.02,shift:rsqrt=1e-3", gap="tanh", backend="lowering_gap",
    ),
)  # fmt: skip


def sh(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 3600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def run(sc: Scenario, work: Path, workers: int) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    (work / "models.txt").write_text("\n".join(entries(list(sc.causes))) + "\n")
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'bench'}{os.pathsep}{REPO / 'tests' / 'triage'}"}
    env.pop("BRINGUP_TESTDEV_FAULTS", None)
    env.update({"BRINGUP_TESTDEV_FAULTS": sc.faults, "TRIAGE_LOWERING_GAP": sc.gap or "none"})
    bringup = [sys.executable, "-m", "bringup.cli", "--db", str(work / "b.db"), "--import", "bringup.testdev"]
    bringup += ["--import", "lowering_gap", "--workers", str(workers)]
    t0 = time.monotonic()
    sweep = sh([*bringup, "--device", "testdev", "zoo", "--source", "models.txt", "--steps", "2", "--noise-seeds",
                "0", "--compile-backend", sc.backend, "--json", "sweep.json"], work, env)  # fmt: skip
    t1 = time.monotonic()
    tri = sh([*bringup, "triage", "--out", str(work / "triage")], work, env)
    t2 = time.monotonic()
    if sweep.returncode not in (0, 1) or not (work / "triage" / "triage.json").is_file():
        return {"name": sc.name, "error": (sweep.stderr + tri.stdout + tri.stderr)[-2000:]}
    block = json.loads((work / "triage" / "triage.json").read_text())
    groups = block["groups"]
    fam = lambda g: sorted({m.split(":")[1].rsplit("_", 1)[0] for m in g["models"]})
    pure = all(len(fam(g)) == 1 and len(g["models"]) == 3 for g in groups)
    checked = sum((g.get("repro") or {}).get("verdict") == "checked" for g in groups)
    return {
        "name": sc.name,
        "kind": sc.kind,
        "k": len(sc.causes),
        "n": 3 * len(sc.causes),
        "groups": len(groups),
        "exact": len(groups) == len(sc.causes) and pure,
        "checked": checked,
        "sweep_s": round(t1 - t0, 1),
        "triage_s": round(t2 - t1, 1),
        "keys": [g["key"][:110] for g in groups],
        "families": [fam(g) for g in groups],
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default=None)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--keep", default=None)
    a = ap.parse_args()
    root = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="triage-groups-"))
    rows = []
    for i, sc in enumerate(SCENARIOS):
        if a.only and a.only not in sc.name:
            continue
        r = run(sc, root / f"s{i}", a.workers)
        rows.append(r)
        if "error" in r:
            print(f"{sc.name}: ERROR\n{r['error']}")
            continue
        print(
            f"{r['name']:<44} {r['kind']:<9} k={r['k']} n={r['n']:<3} groups={r['groups']} "
            f"{'exact' if r['exact'] else 'WRONG'}  repros checked {r['checked']}/{r['groups']}  "
            f"sweep {r['sweep_s']:.0f} s, triage {r['triage_s']:.0f} s",
            flush=True,
        )
        for key, fams in zip(r["keys"], r["families"], strict=True):
            print(f"    {','.join(fams):<10} {key}")
    ok = [r for r in rows if r.get("exact")]
    print(f"exactly k groups: {len(ok)}/{len(rows)} scenarios; results in {root}")
    (root / "bench.json").write_text(json.dumps(rows, indent=1))
    return 0 if len(ok) == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
