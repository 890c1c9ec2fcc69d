"""Transfers on the testdev PrivateUse1 device: a program with known `.to(device)` copies of known
sizes gives exactly those counts and bytes. Runs in a subprocess (importing testdev registers
PrivateUse1 for the whole process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import REPO, load_json

PROGRAM = textwrap.dedent(
    """
    import json, sys
    import torch
    import bringup.testdev
    from bringup.profile import analysis as bp

    dev = torch.device("testdev")
    h2d = [torch.randn(16, 16), torch.randn(100, dtype=torch.float64), torch.ones(3, 5, dtype=torch.int32),
           torch.zeros(7, dtype=torch.bfloat16)]                       # 1024 + 800 + 60 + 14 bytes
    on_dev = [torch.randn(8, 8).to(dev), torch.ones(5, dtype=torch.int64).to(dev)]

    def step():
        for t in h2d:
            t.to(dev)                                                  # 4 host -> device
        for t in on_dev:
            t.to("cpu")                                                # 2 device -> host: 256 + 40 bytes
        on_dev[0].to(dev, copy=True)                                   # same device: no transfer
        h2d[0].to(torch.float64)                                       # cpu -> cpu: no transfer
        on_dev[0].add_(1.0)                                            # native kernel: no transfer

    cap = bp.capture(step, "testdev", steps=int(sys.argv[2]), trace_path=sys.argv[1])
    print(json.dumps(bp.summarize_capture(cap)))
    """
)


def _run(tmp_path: Path, steps: int) -> dict:
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONWARNINGS": "ignore"}
    p = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "trace.json.gz"), str(steps)],
        cwd=tmp_path,
        env=env,
        text=True,
        capture_output=True,
        timeout=900,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("steps", [1, 3])
def test_known_copies_give_exact_transfer_counts_and_bytes(tmp_path: Path, steps: int) -> None:
    s = _run(tmp_path, steps)
    t = s["transfers"]
    assert (t["h2d"]["count"], t["h2d"]["bytes"]) == (4, 1024 + 800 + 60 + 14)  # per step
    assert (t["d2h"]["count"], t["d2h"]["bytes"]) == (2, 256 + 40)
    assert (t["d2d"]["count"], t["d2d"]["bytes"]) == (0, 0)
    assert "unknown" not in t
    assert t["h2d"]["time_from"] == "host" and t["h2d"]["time_s"] > 0  # testdev reports no memcpy events
    assert s["steps"] == steps
    assert s["busy_s"] is None and s["idle_s"] is None and s["host_s"] is None  # no device events: n/a
    assert len(s["activities"]) == 2  # CPU + the PrivateUse1 activity


def test_profile_cli_on_testdev(cli, tmp_path: Path) -> None:
    p = cli(
        "--import",
        "bringup.testdev",
        "--device",
        "testdev",
        "profile",
        "--traced-steps",
        "1",
        "--untraced-steps",
        "1",
        "--batch",
        "1",
        "--seq",
        "16",
        "--override",
        "num_hidden_layers=1",
        "--json",
        "out.json",
        timeout=900,
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    data = load_json(tmp_path / "out.json")
    assert data["device"] == "testdev" and data["top_ops"]
    tr = data["transfers"]
    # The batch goes host -> device once per step: at least batch x seq int64 tokens.
    assert tr["h2d"]["count"] >= 1 and tr["h2d"]["bytes"] >= 1 * 16 * 8
    assert data["busy_s"] is None  # testdev emits no device events
