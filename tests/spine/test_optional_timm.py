"""timm is an optional extra (it pulls torchvision, which pins one torch release): without it bringup
imports and runs everything else, and asking for timm models ends in one line naming the extra."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import assert_one_line_error

REPO = Path(__file__).resolve().parents[2]
NO_TIMM = ("--import", "tests.spine.no_timm")


def test_timm_models_without_timm_say_which_extra(cli) -> None:
    p = cli(*NO_TIMM, "--device", "cpu", "zoo", "--source", "timm", env={"PYTHONPATH": str(REPO)})
    assert_one_line_error(p, "pip install 'bringup[timm]'")


def test_timm_models_with_timm_plan_normally(cli) -> None:
    """The same command with timm installed gets past planning (the error above is about timm only)."""
    p = cli("--device", "cpu", "zoo", "--source", "timm", "--filter", "^$", env={"PYTHONPATH": str(REPO)})
    assert_one_line_error(p, "no model of --source timm matches")


def test_planned_timm_case_without_timm_is_a_config_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    """`run --quick` plans one timm model; without timm it is counted apart (ref_fail 'config'), named."""
    from bringup.models.tiny import ConfigError
    from bringup.zoo import timm_models as timm_zoo

    monkeypatch.setitem(sys.modules, "timm", None)
    assert not timm_zoo.available()
    with pytest.raises(ConfigError, match=r"pip install 'bringup\[timm\]'"):
        timm_zoo.build("test_resnet")


def test_bringup_imports_and_builds_hf_models_without_timm_or_torchvision() -> None:
    code = (
        "import tests.spine.no_timm, bringup.cli, bringup.models, bringup.zoo.suite as z\n"
        "from bringup.models.tiny import build_hf\n"
        "b = build_hf('llama', 'causal-lm')\n"
        "import sys; assert 'timm' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
        "print('OK', type(b.model).__name__)\n"
    )
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and "OK LlamaForCausalLM" in p.stdout, p.stdout[-2000:] + p.stderr[-3000:]


def test_planning_imports_no_torchvision_and_models_still_import_it() -> None:
    """torchvision (and the torch._dynamo it imports, ~2.5 s) is imported only by what needs it: a command's
    planning imports every built-in suite and bringup.models without it; transformers' model modules import
    it through bringup.compat's shim (where this machine's CUDA torchvision sits next to a cpu torch)."""
    code = (
        "import sys, bringup.flow, bringup.models, bringup.api as api\n"
        "[api.get_suite(c.name) for c in api.commands()]\n"
        "print('PLAN', sorted(m for m in ('torchvision', 'torch._dynamo') if m in sys.modules))\n"
        "from bringup.models.tiny import build_hf\n"
        "b = build_hf('llama', 'causal-lm')\n"
        "from bringup.compat import ensure_torchvision_importable as tv\n"
        "print('BUILT', type(b.model).__name__, 'torchvision' in sys.modules, tv())\n"
    )
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    assert "PLAN []" in p.stdout, p.stdout
    assert "BUILT LlamaForCausalLM True" in p.stdout and p.stdout.split()[-1] in ("ok", "shimmed"), p.stdout
