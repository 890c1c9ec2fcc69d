"""`zoo --module-check auto` (the default): on, except on a lazy device (each module's replay there is a
graph of its own to compile: PyTorch/XLA ran gpt2's case past its budget with it); on and off are obeyed
everywhere, and the choice reaches the case params only when it was given."""

from __future__ import annotations

from types import SimpleNamespace

from bringup.device.adapter import EAGER, LAZY
from bringup.zoo import cases as zoo
from bringup.zoo import modules as zoo_modules


def _dev(execution: str) -> SimpleNamespace:
    return SimpleNamespace(adapter=SimpleNamespace(execution=execution))


def test_auto_is_off_on_lazy_devices_only() -> None:
    assert zoo_modules.enabled(None, _dev(EAGER)) is True
    assert zoo_modules.enabled(None, _dev(LAZY)) is False
    assert zoo_modules.enabled(True, _dev(LAZY)) is True and zoo_modules.enabled(False, _dev(EAGER)) is False


def test_the_choice_reaches_the_params_only_when_given() -> None:
    e = zoo.Entry("llama", "llama", "causal-lm")
    for arg, want in (("auto", None), ("on", True), ("off", False)):
        value = zoo_modules.from_arg(arg)
        assert value is want
        c = zoo.make_case(e, zoo.TinyRun("bf16", 4, "inductor", 60.0, module_check=value))
        assert c.params.get("module_check") is want
