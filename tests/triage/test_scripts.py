"""The scripts triage writes, on their own: a graph break's fullgraph script (exit 1 and the group's signature at
the break, 0 on a model that compiles whole), a minified repro made portable and aimed at cpu (pure text)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bringup.triage.compile_repro import break_script, clean_minified, retarget

ZOO = Path(__file__).resolve().parents[1] / "zoo"  # tests/zoo/zoo_models.py: a print in forward, a clean MLP

MINIFIED = """
import os
os.environ['TORCHINDUCTOR_CACHE_DIR'] = '/tmp/torchinductor_someone'
import torch
torch._dynamo.config.debug_dir_root = '/home/someone/run/debug'
def load_args(reader):
    buf0 = reader.storage('431636c5', 32768, device=device(type='testdev', index=0))
    reader.tensor(buf0, (2, 32, 128), requires_grad=True)  # linear_19
if __name__ == '__main__':
    run_repro(mod, load_args, accuracy=False, command='run',
        save_dir='/home/someone/run/checkpoints', autocast=False, backend='lowering_gap')
"""


def test_a_minified_repro_made_portable_and_aimed_at_cpu() -> None:
    text = clean_minified(MINIFIED, ["bringup.testdev", "lowering_gap"])
    assert "/home/someone" not in text and "/tmp/" not in text and "save_dir=None" in text
    assert "import torch\nimport bringup.testdev  # the device's plugin\nimport lowering_gap" in text
    cpu = retarget(text, "testdev")
    assert "device(type='cpu')" in cpu and "testdev'" not in cpu.replace("import bringup.testdev", "")


def _run(script: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{ZOO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run([sys.executable, str(script), *args], env=env, capture_output=True, text=True, timeout=300)


def test_a_graph_break_script_fails_at_the_break_and_passes_whole(tmp_path: Path) -> None:
    brk = {"source": "fn", "model": "zoo_models:print_break", "backend": "eager"}
    script = tmp_path / "repro.py"
    script.write_text(break_script(brk, [], "a print in forward", "cpu", signature="break: x") or "")
    p = _run(script)
    assert p.returncode == 1 and "Failed to trace builtin operator" in p.stdout and "signature: break: x" in p.stdout
    script.write_text(break_script({**brk, "model": "zoo_models:clean_mlp"}, [], "clean", "cpu") or "")
    assert _run(script).returncode == 0
    assert break_script({"source": "timm", "model": "resnet18"}, [], "t", "cpu") is None
