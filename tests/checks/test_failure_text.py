"""bringup/checks/failure_text.py on real strings: one cause reads the same (names, numbers, paths, line numbers
stripped; aten ops and dynamo's backquoted code kept), two causes do not."""

from __future__ import annotations

from pathlib import Path

from bringup.checks.failure_text import (
    exception_key,
    exception_parts,
    native_frame,
    normalize,
    output_signature,
    parse_traceback,
    phase_of,
    relative_path,
    signal_of,
)

FIXTURES = Path(__file__).resolve().parents[1] / "triage" / "fixtures"
# a real traceback: testdev, a zoo llama compiled with tests/triage/lowering_gap.py (torch 2.13.0)
LOWERING = (FIXTURES / "lowering_gap_traceback.txt").read_text()


def test_normalize_strips_names_and_numbers_and_keeps_ops() -> None:
    assert normalize("no lowering for aten.silu.default on testdev (node silu_3)") == (
        "no lowering for aten::silu on testdev (node silu)"
    )
    assert normalize("'tmp5' was not declared in this scope") == normalize("'tmp17' was not declared in this scope")
    assert normalize("\"histogram_cpu\" not implemented for 'Int'") == "\"histogram_cpu\" not implemented for 'Int'"
    assert normalize("shape '[2, 16, 128]' is invalid for input of size 4096") == normalize(
        "shape '[3, 8]' is invalid for input of size 24"
    )
    assert "aten::mm" in normalize("Expected size [2, 16] but got [3, 4] for argument #2 'mat2' aten.mm.default")
    assert normalize("at /tmp/torchinductor_x/ab/cab12.cpp:33 addr 0x7f00ab") == "at <path>:N addr <addr>"
    # the cause stays: another op, another builtin
    assert normalize("no lowering for aten.gelu.default") != normalize("no lowering for aten.silu.default")
    a = "Dynamo does not know how to trace builtin operator `print` with argument types ['str']"
    b = "Dynamo does not know how to trace builtin operator `print` with argument types ['int']"
    c = "Dynamo does not know how to trace builtin operator `input` with argument types ['str']"
    assert normalize(a) == normalize(b) != normalize(c)


def test_the_root_exception_of_a_wrapped_compile_failure() -> None:
    tb = parse_traceback(LOWERING)
    assert tb is not None
    assert (tb.exc_type, tb.message) == ("LoweringError", "no lowering for aten.silu.default on testdev (node silu)")
    assert str(tb.torch_frame) == (
        "torch/_functorch/_aot_autograd/graph_compile.py:_aot_stage2b_compile_forward_or_inference"
    )
    assert str(tb.raised_outside_torch) == "lowering_gap.py:lower"
    assert phase_of(tb.torch_frame) == "aot autograd"
    parts = exception_parts(LOWERING)
    assert exception_key(parts) == (
        "LoweringError | aot autograd | lowering_gap.py:lower | no lowering for aten::silu on testdev (node silu)"
    )
    # the same failure on another machine, in another release (paths and line numbers moved): the same key
    moved = LOWERING.replace("/home/someone/bringup/.venv/lib/python3.11/site-packages", "/opt/py312/site-packages")
    moved = moved.replace("line 2800", "line 2911").replace("line 47,", "line 52,")
    assert exception_key(exception_parts(moved)) == exception_key(parts)
    # what a repro run printed: the traceback alone, or a signature line it printed itself
    assert output_signature(LOWERING) == exception_key(parts)
    assert output_signature("aten::silu: MISMATCH\nsignature: numeric: aten::silu | float32\n") == (
        "numeric: aten::silu | float32"
    )
    assert output_signature("all fine\n") == ""


def test_a_one_line_reason_when_no_traceback_was_kept() -> None:
    p = exception_parts("", "compiled: RuntimeError: 'tmp3' was not declared in this scope")
    assert (p["exception"], p["message"], p["phase"]) == ("RuntimeError", "<name> was not declared in this scope", "")


def test_phases_of_torch_frames() -> None:
    from bringup.checks.failure_text import Frame

    assert phase_of(Frame("torch/_inductor/lowering.py", "make_fallback")) == "inductor lowering"
    assert phase_of(Frame("torch/_inductor/codecache.py", "compile")) == "inductor kernel compile"
    assert phase_of(Frame("torch/_dynamo/symbolic_convert.py", "step")) == "dynamo trace"
    assert (
        phase_of(Frame("torch/_dynamo/output_graph.py", "_call_user_compiler")) == "backend compile (called by dynamo)"
    )
    assert phase_of(None) == ""
    assert relative_path("/x/y/site-packages/torch/_inductor/ir.py") == "torch/_inductor/ir.py"
    assert relative_path("C:\\py\\Lib\\site-packages\\torch\\fx\\graph.py") == "torch/fx/graph.py"


def test_a_crash_is_its_signal_and_last_native_frame() -> None:
    assert signal_of("worker killed by SIGSEGV") == "SIGSEGV"
    assert signal_of("worker exited with code 3") == "exit 3"
    cpp = (
        "terminate called after throwing an instance of 'c10::Error'\n"
        "Exception raised from fallback at /pytorch/aten/src/ATen/native/CPUFallback.cpp:120 "
        "(most recent call first):\n"
        "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f1 in /x/libc10.so)\n"
        "frame #1: at::native::cpu_fallback(c10::OperatorHandle const&, std::vector<c10::IValue>*) + 0x1a0 (0x7f2)\n"
    )
    assert native_frame(cpp) == "c10::Error::Error(c10::SourceLocation, std::string)"
    glibc = "Backtrace:\n/usr/lib/libtestdev.so(_ZN7testdev4copyEv+0x42)[0x7f00]\n/lib/libc.so.6(+0x1234)[0x7f01]\n"
    assert native_frame(glibc) == "libtestdev.so:_ZN7testdev4copyEv"
    fault = (
        "Fatal Python error: Segmentation fault\n\nCurrent thread 0x7f (most recent call first):\n"
        '  File "/a/b/bringup/zoo/steps.py", line 130 in train_steps\n'
    )
    assert native_frame(fault) == "python: bringup/zoo/steps.py:train_steps"
    assert native_frame("nothing here") == ""
