"""Every suite's quick path (`bringup run --quick --only SUITE`) on the out-of-tree testdev device:
each capability proven on a device that is neither cpu nor cuda. Verdicts must be honest: no case
may end in `error` (our bug) or `crash`; where a suite cannot run on a PrivateUse1 device it must
say `unsupported`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import load_json

TD = ("--import", "bringup.testdev", "--device", "testdev")
# Extra, suite-specific honesty checks on the statuses of the quick cases.
ALLOWED: dict[str, set[str]] = {
    "smoke": {"pass"},
    "ops": {"pass", "fallback"},  # the quick ops all run on testdev, natively or via its CPU fallback
    "probe": {"pass", "fallback", "unsupported", "fail_compile", "silent_eager"},
    "flex": {"unsupported", "ref_fail"},  # FlexAttention's _validate_device rejects PrivateUse1 devices
}


# Slow, with their cheap forms in `make test`: train and zoo (~100 s each here): on a clean testdev, zoo's gpt2 and
# train's eager step end in pass / fallback in test_testdev_tying.py, and test_testdev_faults.py runs both suites on
# testdev end to end; flex: tests/flex/test_flex_cli.py::test_privateuse1_device_is_unsupported_not_a_crash;
# profile: tests/profile/test_profile_testdev.py::test_profile_cli_on_testdev (which asserts more).
SLOW = pytest.mark.slow


@pytest.mark.parametrize(
    "suite",
    ["smoke", "ops", "probe", *(pytest.param(s, marks=SLOW) for s in ("train", "flex", "zoo", "profile"))],
)
def test_quick_suite_on_testdev(suite: str, cli, tmp_path: Path, testdev_built: None) -> None:
    p = cli(*TD, "run", "--quick", "--only", suite, "--json", "out.json", timeout=1800)
    assert p.returncode in (0, 1), p.stderr[-3000:]
    data = load_json(tmp_path / "out.json")
    cases = [c for c in data["cases"] if c["suite"] == suite]
    assert cases, data["cases"]
    assert data["device"] == "testdev"
    bad = [(c["name"], c["status"], c["reason"]) for c in cases if c["status"] in ("error", "crash")]
    assert not bad, bad
    if suite in ALLOWED:
        off = [(c["name"], c["status"], c["reason"]) for c in cases if c["status"] not in ALLOWED[suite]]
        assert not off, off
    if suite == "probe":
        st = {c["name"]: c["status"] for c in cases}
        assert st["fp8.float8_e4m3fn"] == "pass"  # conversions are native copies
        assert st["autocast.bfloat16"] == "pass"  # testdev registers autocast kernels
        assert st["dtype.bfloat16"] == "fallback"  # its sum runs through the CPU fallback
        assert st["distributed.default"] == "unsupported"  # no process-group backend for testdev
        assert st["distributed.dtensor"] == st["distributed.fsdp2"] == "unsupported"
        assert st["execution.eager"] == "pass"  # its kernels run as they are called
        assert st["compile.inductor"] in ("unsupported", "fail_compile")  # inductor has no testdev codegen
        # aot_eager compiles, but its graph's gelu / mean run on the CPU fallback: not a `pass`
        assert st["compile.aot_eager"] == "fallback"
