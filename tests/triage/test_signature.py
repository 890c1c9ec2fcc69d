"""The signature function (bringup/triage/signature.py, pure) and the grouping (groups.py): two cases with one
cause get one signature, two causes two; reach, history, the report's bug history."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bringup.case import CaseResult, Status
from bringup.store import RunInfo
from bringup.triage.groups import build_block, group, ranked
from bringup.triage.signature import module_kind, signature

LOWERING = (Path(__file__).parent / "fixtures" / "lowering_gap_traceback.txt").read_text()


def case(name: str, status: Status, reason: str = "", error: str = "", **fields: Any) -> CaseResult:
    params = {"source": "hf", "model": name, "task": "causal-lm", "dtype": "fp32", "backend": "aot_eager", "seed": 0}
    return CaseResult(
        f"id-{name}-{status.value}", "zoo", name, status, reason, fields=fields, error=error, params=params
    )


def module_fail(name: str, cls: str, why: str = "out.0: bias +0.01", label: str = "eager_modules") -> CaseResult:
    failed = [{"module": "model.layers.0.x", "class": cls, "why": why}]
    return case(name, Status.FAIL_NUMERIC, "eager: 22/23 tensors off", **{label: {"failed": failed}})


def loc(op: str, backward: bool = False) -> dict[str, Any]:
    return {"first_op": op, "op_dtypes": ["float32"], "op_backward": backward, "first_module": "m", "reason": "x"}


def run(run_id: str, at: float, device: str = "testdev", **info: Any) -> RunInfo:
    return RunInfo(run_id, "zoo", [], "0", "2.13", device, device, "h", at, at + 1, "finished", info)


def test_module_kind_drops_the_models_own_prefix() -> None:
    assert module_kind("Qwen3RMSNorm", "qwen3") == module_kind("LlamaRMSNorm", "llama") == "RMSNorm"
    assert module_kind("GPTNeoXAttention", "gpt_neox") == "Attention"
    assert module_kind("SiLUActivation", "llama") == "SiLUActivation"
    assert module_kind("Llama", "llama") == "Llama"


def test_numeric_one_cause_one_signature() -> None:
    a, b = signature(module_fail("llama", "LlamaRMSNorm")), signature(module_fail("qwen3", "Qwen3RMSNorm"))
    assert a is not None and b is not None and a.key == b.key and a.resolution == "module"
    # forward vs backward, eager vs compiled, another module kind: other causes
    assert signature(module_fail("llama", "LlamaRMSNorm", why="grad.x: bias")).key != a.key
    assert signature(module_fail("llama", "LlamaRMSNorm", label="compiled_modules")).key != a.key
    assert "compiled (aot_eager)" in signature(module_fail("llama", "LlamaRMSNorm", label="compiled_modules")).key
    # localized: the op names it, the module-level key is kept to meet unlocalized runs
    op = signature(module_fail("llama", "SiLUActivation"), loc("aten::silu"))
    assert op.key == "numeric: aten::silu | float32 | forward | eager" and op.resolution == "op"
    assert op.coarse == signature(module_fail("mistral", "SiLUActivation")).key
    assert op.matches(op.coarse) and not op.matches("numeric: aten::gelu | float32 | forward | eager")
    assert signature(module_fail("llama", "SiLUActivation"), loc("aten::sigmoid", backward=True)).key.endswith(
        "aten::sigmoid | float32 | backward | eager"
    )
    whole = signature(case("bloom", Status.FAIL_NUMERIC, "eager: 3/20 tensors off"))
    assert whole.resolution == "model" and whole.key == "numeric-model: eager | float32 | eager"


def test_fallback_is_the_set_of_ops_with_dtypes() -> None:
    f = {
        "fallback_ops": {"aten::gelu": 3, "aten::_local_scalar_dense": 1},
        "fallback_dtypes": {"aten::gelu": ["float32"]},
    }
    a = signature(case("gpt2", Status.FALLBACK, "ran through the CPU fallback", **f))
    b = signature(case("opt", Status.FALLBACK, "ran through the CPU fallback", **{**f, "fallback_ops": ["aten::gelu"]}))
    assert a.key == b.key == "fallback: aten::gelu[float32]"  # a host read is no fallback
    bf16 = signature(
        case("gpt2", Status.FALLBACK, "", fallback_ops={"aten::gelu": 1}, fallback_dtypes={"aten::gelu": ["bfloat16"]})
    )
    assert bf16.key != a.key
    assert signature(case("x", Status.FALLBACK, "", backend_fallback_ops={"aten::sin": 2})).key == "fallback: aten::sin"


def test_compile_failure_type_phase_frame_message() -> None:
    a = signature(case("llama", Status.FAIL_COMPILE, "compiled: BackendCompilerFailed", LOWERING))
    moved = LOWERING.replace(
        "/home/someone/bringup/.venv/lib/python3.11/site-packages", "/usr/lib/python3/site-packages"
    )
    b = signature(
        case("mistral", Status.FAIL_COMPILE, "compiled: BackendCompilerFailed", moved.replace("silu)", "silu_4)"))
    )
    assert a.key == b.key and a.kind == "compile" and a.parts["phase"] == "aot autograd"
    gelu = signature(case("gpt2", Status.FAIL_COMPILE, "x", LOWERING.replace("aten.silu", "aten.gelu")))
    assert gelu.key != a.key
    unsup = signature(case("x", Status.UNSUPPORTED, "eager: NotImplementedError: 'aten::foo' not on testdev"))
    assert unsup.kind == "unsupported" and unsup.key.startswith("unsupported: NotImplementedError")


def test_crash_budget_oom_breaks_and_what_is_not_signed() -> None:
    crash = signature(case("a", Status.CRASH, "worker killed by SIGSEGV", "frame #0: testdev::copy(int) + 0x42"))
    assert crash.key == "crash: SIGSEGV | testdev::copy(int)"
    assert signature(case("a", Status.BUDGET, "budget: compile exceeded its budget", budget_phase="compile")).key == (
        "budget: compile"
    )
    assert signature(case("a", Status.OOM, "eager: OutOfMemoryError: x")).key == "oom: eager"
    br = {"break_reasons": {"Unsupported Tensor.item() call with capture_scalar_outputs=False": 2}}
    assert signature(case("a", Status.SILENT_EAGER, "compiled: no graph", **br)).kind == "break"
    assert signature(case("a", Status.PASS)) is None and signature(case("a", Status.REF_FAIL)) is None


def test_groups_reach_and_the_inferred_join() -> None:
    pairs = []
    for name, loc_ in (("llama", loc("aten::silu")), ("mistral", loc("aten::silu")), ("qwen2", None)):
        r = module_fail(name, "SiLUActivation")
        pairs.append((r, signature(r, loc_)))
    r = module_fail("gpt2", "GELUActivation")
    pairs.append((r, signature(r)))
    groups = ranked(group(pairs))
    assert [len(g.cases) for g in groups] == [3, 1]
    assert groups[0].signature.resolution == "op" and groups[0].extra["inferred"] == ["id-qwen2-fail_numeric"]
    # two localized cases that disagree: the unlocalized one stays at module level
    r3 = module_fail("phi3", "SiLUActivation")
    split = group([*pairs[:2], (r3, signature(r3, loc("aten::mul"))), pairs[2]])
    assert len(split) == 3


def test_block_reach_from_the_hub_and_first_last_seen() -> None:
    results = [module_fail("llama", "SiLUActivation"), module_fail("gpt2", "GELUActivation")]
    hub = [
        {"model_id": "org/a", "case_id": "id-gpt2-fail_numeric", "downloads": 900},
        {"model_id": "org/b", "case_id": "id-gpt2-fail_numeric", "downloads": 100},
        {"model_id": "org/c", "case_id": "id-llama-fail_numeric", "downloads": 50},
    ]
    old_block, _ = build_block(run("r1", 1.0), [module_fail("llama", "SiLUActivation")])
    block, groups = build_block(run("r2", 2.0), results, hub, [run("r1", 1.0, bugs=old_block)])
    g0 = block["groups"][0]
    assert g0["models"] == ["gpt2"] and g0["reach"]["downloads"] == 1000 and g0["hub_top"][0]["model_id"] == "org/a"
    silu = block["groups"][1]
    assert silu["first_seen"]["run_id"] == "r1" and silu["last_seen"]["run_id"] == "r2" and silu["runs_seen"] == 2
    assert block["cases_signed"] == 2 and block["numeric_resolution"]["module"] == 2


def test_report_history_follows_groups_fixed_and_back() -> None:
    from bringup.report.bug_history import tracks
    from bringup.report.history import StoredRun

    silu = module_fail("llama", "SiLUActivation")
    fine = CaseResult(silu.case_id, "zoo", "llama", Status.PASS, params=silu.params)
    other = module_fail("gpt2", "GELUActivation")

    def stored(n: int, results: list[CaseResult]) -> StoredRun:
        block, _ = build_block(run(f"r{n}", float(n)), results)
        return StoredRun(n, "db", run(f"r{n}", float(n), bugs=block), tuple(results))

    runs = [stored(1, [silu, other]), stored(2, [fine, other]), stored(3, [other]), stored(4, [silu, other])]
    ts = {t.title.split(" is a ")[-1][:14]: t for t in tracks(runs)}
    s, g = ts["SiLUActivation"], ts["GELUActivation"]
    assert s.events == [(1, "new"), (2, "fixed"), (4, "back")] and s.states[3] == "not run" and s.open
    assert g.events == [(1, "new")] and g.open


def test_history_page_section_and_the_scorecard_section_render() -> None:
    from bringup.report.bug_history import section_html as history_section
    from bringup.report.history import StoredRun
    from bringup.triage.section import section_html

    r = module_fail("llama", "SiLUActivation")
    block, _ = build_block(run("r1", 1.0), [r])
    html = section_html(block)
    assert 'id="sec-bugs"' in html and "SiLUActivation" in html and "1 model(s)" in html
    assert "<script" not in section_html({**block, "groups": [{**block["groups"][0], "title": "<script>x</script>"}]})
    runs = [StoredRun(1, "db", run("r1", 1.0, bugs=block), (r,))]
    assert "bug group(s), 1 open" in history_section(runs)


def test_bad_input_is_one_line(bringup_inproc, tmp_path: Path) -> None:
    from tests.conftest import assert_one_line_error

    assert_one_line_error(bringup_inproc("--db", str(tmp_path / "none.db"), "triage"), "no result database")
    args = ("--db", str(tmp_path / "none.db"), "triage", "--bisect")
    assert_one_line_error(bringup_inproc(*args), "--bisect needs the candidates")
    assert_one_line_error(bringup_inproc("triage", "--between", "torch==2.9", "torch"), "add --bisect")
    assert_one_line_error(bringup_inproc("triage", "--top", "0"), "--top")
