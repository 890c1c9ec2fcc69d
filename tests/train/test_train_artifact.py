"""Portable cache artifacts (bringup/train/artifact.py) and the cache accounting (train/accounting.py).

The round trip runs two fresh Python processes, each with its own empty cache directories: one compiles
and writes the artifact, the other loads it and compiles the same function; the proof is torch's
cache counters (hits, no misses), never wall time (speed is measured in bench/first_step.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bringup.case import CaseResult, Status
from bringup.errors import BadInput
from bringup.train import accounting, arms, artifact
from bringup.train.spec import TrainSpec

REPO = Path(__file__).resolve().parents[2]
SPEC = TrainSpec(mode="compile", cache="cold", model="qwen3-tiny", batch=2, seq=64)


def test_header_round_trip_and_fit(tmp_path: Path) -> None:
    p = tmp_path / "a.bin"
    artifact.write(p, artifact.header_for(SPEC, "cpu", artifact.KIND_MEGA), b"payload")
    art = artifact.read(p)
    assert art.payload == b"payload" and art.header["device_type"] == "cpu" and art.header["bytes"] == 7
    assert artifact.check(p, SPEC.with_(cache="artifact"), "cpu")["kind"] == artifact.KIND_MEGA


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("torch", "2.12.0+cu128", "torch '2.12.0+cu128'"),
        ("device_type", "cuda", "device_type 'cuda'"),
        ("backend", "neuron", "backend 'neuron'"),
        ("seq", 128, "seq 128"),
        ("model", "qwen3-0.6b", "model"),
    ],
)
def test_a_mismatched_artifact_is_one_clear_line(tmp_path: Path, field: str, value: object, named: str) -> None:
    p = tmp_path / "a.bin"
    artifact.write(p, {**artifact.header_for(SPEC, "cpu", artifact.KIND_MEGA), field: value}, b"x")
    with pytest.raises(BadInput) as e:
        artifact.check(p, SPEC, "cpu")
    msg = str(e.value)
    assert "\n" not in msg and named in msg and "would start cold" in msg


def test_foreign_truncated_and_missing_files(tmp_path: Path) -> None:
    (tmp_path / "junk").write_bytes(b"\x00" * 64)
    with pytest.raises(BadInput, match="not a bringup cache artifact"):
        artifact.read(tmp_path / "junk")
    good = artifact.encode(artifact.header_for(SPEC, "cpu", artifact.KIND_MEGA), b"0123456789")
    (tmp_path / "cut").write_bytes(good[:-3])
    with pytest.raises(BadInput, match="truncated"):
        artifact.read(tmp_path / "cut")
    with pytest.raises(BadInput, match="cannot read"):
        artifact.read(tmp_path / "nope")


def test_cli_refuses_a_mismatched_artifact_with_exit_2(cli, tmp_path: Path) -> None:
    p = tmp_path / "old.bin"
    artifact.write(p, {**artifact.header_for(SPEC, "cpu", artifact.KIND_MEGA), "torch": "1.0.0"}, b"x")
    r = cli(
        "--device",
        "cpu",
        "train",
        "--modes",
        "eager,compile",
        "--batch",
        "2",
        "--seq",
        "64",
        "--load-cache-artifact",
        str(p),
    )
    assert r.returncode == 2, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "torch '1.0.0'" in lines[0] and "Traceback" not in r.stderr


# ---- the round trip: two fresh processes, two empty cache dirs --------------------------------------
CHILD = r"""
import json, os, sys, tempfile
root, mode, art = sys.argv[1], sys.argv[2], sys.argv[3]
os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(root, "inductor")
# inductor's C++ precompiled headers live under the temp dir whatever TORCHINDUCTOR_CACHE_DIR says: each
# child has its own, as each new job has (bringup's cache dirs point TMPDIR at the case's tmp/)
os.makedirs(os.path.join(root, "tmp"), exist_ok=True)
os.environ["TMPDIR"] = tempfile.tempdir = os.path.join(root, "tmp")
import torch
from torch._inductor import cpu_vec_isa
from bringup.train import artifact, compile_metrics
proofs = []
_check_build = cpu_vec_isa.VecISA.check_build
cpu_vec_isa.VecISA.check_build = lambda self, code: proofs.append(str(self)) or _check_build(self, code)
from bringup.train.spec import TrainSpec
spec = TrainSpec(mode="compile", model="tiny-mlp", batch=4, seq=16)
width = int(sys.argv[4])
loaded, supplied = {}, {}
if mode.startswith("load"):
    artifact.check(art, spec, "cpu")
    a = artifact.read(art)
    if mode == "load" and a.kernels:
        supplied = artifact.unpack_kernels(a.kernels)
        supplied["vec_isa_adopted"] = artifact.adopt_vec_isa(a.header["kernels"]["vec_isa"])
    loaded = artifact.load_mega_cache(a.payload)
kernels = artifact.kernel_files()
headers_dir = artifact.kernel_dirs()["headers"]
gch = {str(p) for p in headers_dir.glob("**/*.gch")}
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(16, width), torch.nn.SiLU(), torch.nn.Linear(width, 16))
torch.compile(m)(torch.randn(4, 16)).sum().backward()
if mode == "save":
    artifact.write(art, artifact.header_for(spec, "cpu", artifact.KIND_MEGA), artifact.mega_cache_bytes(),
                   *artifact.pack_kernels())
print(json.dumps({"cache": compile_metrics.snapshot()["cache"], "loaded": loaded, "supplied": supplied,
                  "built": len(artifact.kernel_files() - kernels),
                  "headers_built": len({str(p) for p in headers_dir.glob("**/*.gch")} - gch),
                  "headers_dir": str(headers_dir), "isa_proofs": len(proofs)}))
"""


def _child(tmp: Path, name: str, mode: str, art: Path, width: int = 32) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("TORCHINDUCTOR_VEC_ISA_OK", None)  # conftest's shortcut: these children count the ISA proofs
    argv = [sys.executable, "-c", CHILD, str(tmp / name), mode, str(art), str(width)]
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_artifact_made_in_one_process_starts_another_warm_with_no_kernel_built(tmp_path: Path) -> None:
    """The new job (empty cache dirs, empty temp dir) hits every graph and builds no C++ kernel and no
    precompiled header: the artifact supplied them. Counted as files inductor wrote, not timed."""
    art = tmp_path / "warm.bin"
    made = _child(tmp_path, "a", "save", art)
    assert made["cache"]["fx_miss"] > 0 and made["cache"]["fx_hit"] == 0  # process A compiled cold ...
    assert made["built"] > 0 and made["headers_built"] > 0  # ... and built its kernels: the count sees builds
    head = artifact.read(art).header
    assert head["kernels"]["kernels"] == made["built"] and head["kernels"]["headers"] == made["headers_built"]
    got = _child(tmp_path, "b", "load", art)  # fresh process, empty cache dirs, the artifact loaded
    assert got["headers_dir"].startswith(str(tmp_path / "b"))  # (b never saw a's directories)
    c = got["cache"]
    assert got["loaded"].get("inductor", 0) > 0 and got["loaded"].get("aot_autograd", 0) > 0
    assert c["fx_hit"] > 0 and c["fx_miss"] == 0 and c["aot_hit"] > 0 and c["aot_miss"] == 0
    assert got["supplied"] == {"kernels": made["built"], "headers": made["headers_built"], "vec_isa_adopted": True}
    assert got["built"] == 0 and got["headers_built"] == 0
    # the maker proved its ISA pick; the new job took it and proved only the sub-features inductor always
    # checks (bf16 / VNNI: they set compile flags); 0 kernels built says the flags came out the same
    assert 0 < got["isa_proofs"] < made["isa_proofs"]
    assert accounting.reused_nothing(TrainSpec(mode="compile", cache="artifact"), c) == ""


@pytest.mark.slow
def test_graphs_alone_rebuild_the_kernels_and_the_count_says_so(tmp_path: Path) -> None:
    """The counter's power on a real job: the mega-cache alone (the old artifact) hits every graph and
    still builds every kernel, and the accounting warns."""
    art = tmp_path / "warm.bin"
    made = _child(tmp_path, "a", "save", art)
    got = _child(tmp_path, "b", "load-graphs-only", art)
    assert got["cache"]["fx_hit"] > 0 and got["cache"]["fx_miss"] == 0
    assert got["built"] == made["built"] > 0
    kernels = accounting.compiled_kernels({}, got["built"])
    assert "supplied no compiled kernels" in accounting.kernel_warning(TrainSpec(cache="artifact"), kernels)


@pytest.mark.slow
def test_an_artifact_for_other_graphs_is_caught_as_a_cold_start(tmp_path: Path) -> None:
    """The verdict's power on real counters (its cheap form: test_a_warm_arm_that_hit_nothing_...): the
    artifact loaded under other graphs (another width) reuses nothing, and the rule says so."""
    art = tmp_path / "warm.bin"
    _child(tmp_path, "a", "save", art)
    other = _child(tmp_path, "c", "load", art, width=48)["cache"]
    assert other["fx_hit"] == 0 and other["fx_miss"] > 0
    why = accounting.reused_nothing(TrainSpec(mode="compile", cache="artifact"), other)
    assert why.startswith("the loaded cache artifact gave nothing")


# ---- the kernel section: damaged, foreign, old -------------------------------------------------------
def _kernel_section(files: dict[str, bytes]) -> bytes:
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _with_kernels(p: Path, spec: TrainSpec = SPEC, **stack: object) -> bytes:
    section = _kernel_section({"inductor/ab/cabc.so": b"\x7fELF-not-really", "headers/cdef.h": b"#include <x>\n"})
    info = {**artifact.kernel_stack(), "kernels": 1, "headers": 0, **stack}
    artifact.write(p, artifact.header_for(spec, "cpu", artifact.KIND_MEGA), b"mega", section, info)
    return section


def test_a_kernel_section_round_trips_and_unpacks_where_inductor_looks(tmp_path: Path, monkeypatch) -> None:
    p = tmp_path / "a.bin"
    section = _with_kernels(p)
    art = artifact.read(p)
    assert art.payload == b"mega" and art.kernels == section and art.header["kernels"]["bytes"] == len(section)
    assert artifact.check(p, SPEC.with_(cache="artifact"), "cpu")["kernels"]["kernels"] == 1
    dirs = {"inductor": tmp_path / "ind", "headers": tmp_path / "hdr"}
    monkeypatch.setattr(artifact, "kernel_dirs", lambda: dirs)
    assert artifact.unpack_kernels(art.kernels) == {"kernels": 1, "headers": 0}
    assert (dirs["inductor"] / "ab" / "cabc.so").read_bytes() == b"\x7fELF-not-really"
    assert artifact.kernel_files(dirs["inductor"]) == {"ab/cabc.so"} and (dirs["headers"] / "cdef.h").exists()


def test_a_damaged_kernel_section_is_one_line_exit_2(cli, tmp_path: Path) -> None:
    p = tmp_path / "a.bin"
    spec = TrainSpec(mode="compile", batch=2, seq=64)
    _with_kernels(p, spec)
    data = bytearray(p.read_bytes())
    data[-20] ^= 0xFF  # one flipped bit pattern inside the kernel section
    p.write_bytes(bytes(data))
    with pytest.raises(BadInput, match="damaged kernel section"):
        artifact.read(p)
    r = cli(
        "--device",
        "cpu",
        "train",
        "--modes",
        "eager,compile",
        "--batch",
        "2",
        "--seq",
        "64",
        "--load-cache-artifact",
        str(p),
    )
    assert r.returncode == 2, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "damaged kernel section" in lines[0] and "Traceback" not in r.stderr


@pytest.mark.parametrize(
    ("stack", "named"),
    [
        ({"cpu_capability": "SVE256"}, "cpu_capability 'SVE256'"),
        ({"machine": "aarch64"}, "machine 'aarch64'"),
        ({"compiler": "clang version 19.1.0", "compiler_sha256": "0" * 64}, "compiler 'clang version 19.1.0'"),
    ],
)
def test_kernels_for_another_machine_or_compiler_are_refused_in_one_line(
    tmp_path: Path, stack: dict, named: str
) -> None:
    p = tmp_path / "a.bin"
    _with_kernels(p, **stack)
    with pytest.raises(BadInput) as e:
        artifact.check(p, SPEC, "cpu")
    msg = str(e.value)
    assert "\n" not in msg and named in msg and "would start cold" in msg and "this machine" in msg


def test_the_cli_refuses_kernels_for_another_isa_with_exit_2(cli, tmp_path: Path) -> None:
    p = tmp_path / "a.bin"
    _with_kernels(p, TrainSpec(mode="compile", batch=2, seq=64), cpu_capability="SVE256")
    r = cli(
        "--device",
        "cpu",
        "train",
        "--modes",
        "eager,compile",
        "--batch",
        "2",
        "--seq",
        "64",
        "--load-cache-artifact",
        str(p),
    )
    assert r.returncode == 2, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "cpu_capability 'SVE256'" in lines[0] and "Traceback" not in r.stderr


@pytest.mark.parametrize("name", ["../evil.so", "elsewhere/x.so", "inductor/", "inductor/../../evil.so"])
def test_a_kernel_section_with_foreign_entries_is_refused(tmp_path: Path, monkeypatch, name: str) -> None:
    monkeypatch.setattr(artifact, "kernel_dirs", lambda: {"inductor": tmp_path / "i", "headers": tmp_path / "h"})
    with pytest.raises(BadInput, match="damaged kernel section"):
        artifact.unpack_kernels(_kernel_section({name: b"x"}))
    with pytest.raises(BadInput, match="damaged kernel section"):
        artifact.unpack_kernels(b"not a tar at all")
    assert not (tmp_path / "evil.so").exists()


def test_an_old_format_file_is_one_clear_line(tmp_path: Path) -> None:
    p = tmp_path / "v1.bin"
    p.write_bytes(b"BRINGUP-CACHE-ARTIFACT v1\n" + json.dumps({"kind": "mega-cache", "bytes": 1}).encode() + b"\nx")
    with pytest.raises(BadInput) as e:
        artifact.read(p)
    assert "file format v1" in str(e.value) and "--save-cache-artifact" in str(e.value) and "\n" not in str(e.value)


# ---- accounting, pure -------------------------------------------------------------------------------
def _snap(**cache: int) -> dict:
    from bringup.train.compile_metrics import CACHE_COUNTERS

    return {"graphs": 1, "cache": {k: cache.get(k, 0) for k in CACHE_COUNTERS}}


def test_accounting_warns_when_a_backend_bypasses_aot_autograd_caching() -> None:
    spec = TrainSpec(mode="compile", cache="cold", backend="my_backend")
    w = accounting.warnings(spec, _snap())  # graphs compiled, no AOTAutograd or FX cache lookup at all
    assert any("bypasses AOTAutograd's cache" in x for x in w) and any("no FX graph cache" in x for x in w)
    assert accounting.warnings(spec, _snap(fx_miss=2, aot_miss=1)) == []  # inductor-style: both layers used
    assert "bypassed 3 time(s)" in accounting.warnings(spec, _snap(fx_miss=2, aot_bypass=3))[0]


def test_a_real_non_inductor_backend_is_warned_about() -> None:
    """dynamo's own `eager` backend (no AOTAutograd, no inductor): the real counters, the same warning."""
    import torch
    import torch._dynamo

    from bringup.train import compile_metrics

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    x = torch.randn(8, requires_grad=True)
    torch.compile(lambda t: (t.sin() * 2).sum(), backend="eager")(x).backward()
    w = accounting.warnings(TrainSpec(mode="compile", backend="eager"), compile_metrics.snapshot())
    assert any("bypasses AOTAutograd's cache" in x for x in w)


def test_a_warm_arm_that_hit_nothing_is_unsupported_not_pass() -> None:
    r = CaseResult(case_id="x", suite="train", name="compile-warm", status=Status.PASS)
    v = accounting.account(r, TrainSpec(mode="compile", cache="warm"), _snap(fx_miss=3, aot_miss=1), {})
    assert v and v[0][0] is Status.UNSUPPORTED and "compiled cold" in v[0][1]
    assert accounting.account(r, TrainSpec(mode="compile", cache="warm"), _snap(fx_hit=3, aot_hit=1), {}) == []
    assert r.fields["cache_layers"]["fx_graph"] == {"hit": 3, "miss": 0, "bypass": 0}
    # a cold arm misses by definition: no verdict
    assert accounting.account(r, TrainSpec(mode="compile", cache="cold"), _snap(fx_miss=3), {}) == []


def test_kernels_supplied_and_built_are_counted_and_a_rebuild_is_warned_about() -> None:
    art = TrainSpec(mode="compile", cache="artifact")
    r = CaseResult(case_id="x", suite="train", name="compile-artifact", status=Status.PASS)
    loaded = {"entries": {"inductor": 2}, "bytes": 10, "kernels_supplied": 9, "headers_supplied": 1}
    assert accounting.account(r, art, _snap(fx_hit=2, aot_hit=1), loaded, built=0) == []
    assert r.fields["cache_layers"]["compiled_kernels"] == {"supplied": 9, "built": 0}
    assert r.fields["cache_layers"]["artifact"]["kernels"] == 9 and "cache_warnings" not in r.fields
    accounting.account(r, art, _snap(fx_hit=2, aot_hit=1), loaded, built=4)
    assert "supplied 9 compiled kernel(s) but this job built 4 more" in r.fields["cache_warnings"][0]
    accounting.account(r, art, _snap(fx_hit=2, aot_hit=1), {"entries": {"inductor": 2}}, built=9)
    assert "supplied no compiled kernels: this job built 9" in r.fields["cache_warnings"][0]
    cold = TrainSpec(mode="compile", cache="cold")  # a cold arm builds its kernels: no warning, only the count
    c = CaseResult(case_id="y", suite="train", name="compile-cold", status=Status.PASS)
    accounting.account(c, cold, _snap(fx_miss=2, aot_miss=1), {}, built=9)
    assert c.fields["cache_layers"]["compiled_kernels"] == {"supplied": 0, "built": 9}
    assert "cache_warnings" not in c.fields


# ---- the fastest-start table ----------------------------------------------------------------------
def test_fastest_arm_per_step_count_from_measured_numbers() -> None:
    a = [
        {"arm": "eager", "job_ttfs_s": 2.0, "step_s": 1.0},
        {"arm": "compile-cold", "job_ttfs_s": 40.0, "step_s": 0.5},
        {"arm": "compile-artifact", "job_ttfs_s": 10.0, "step_s": 0.5},
        {"arm": "regional-warm", "job_ttfs_s": 2.5, "step_s": 0.55},
    ]
    assert arms.fastest(a) == {1: "eager", 100: "regional-warm", 10_000: "compile-artifact"}
    rows = arms.table(a)
    assert rows[0]["arm"] == "eager" and rows[0]["steady_vs_full_compile"] == 2.0
    assert rows[-1]["reach_s"]["10000"] == pytest.approx(40.0 + 9999 * 0.5)
    text = arms.advice(a)
    assert "step 1: eager" in text and "step 100: regional-warm" in text and "step 10,000: compile-artifact" in text
    assert arms.fastest([{"arm": "x", "job_ttfs_s": None, "step_s": 1.0}]) == {}
    assert arms.waterfall({"load_artifact_s": 1.0, "run_s": 3.0}, 8) == "..rrrrrr"


# ---- planning the arms (pure) -----------------------------------------------------------------------
def _plan(**kw: object) -> list:
    from bringup.train import suite as train
    from tests.train.test_train_units import CPU, _args

    return train.build_cases(_args(**kw), CPU)


def test_cache_all_plans_every_arm_each_in_its_own_process() -> None:
    cases = _plan(cache="all", steps=3)
    assert [c.name for c in cases] == [
        "eager",
        "compile-cold",
        "regional-cold",
        "nested-cold",
        "aot-cold",
        "compile-warm",
        "regional-warm",
        "nested-warm",
        "compile-artifact",
        "regional-artifact",
        "aot-artifact",
    ]
    assert all(c.isolated for c in cases) and len({c.case_id for c in cases}) == len(cases)
    specs = {c.name: TrainSpec.from_params(c.params) for c in cases}
    # an artifact arm finds its cold case's dir (same cache key) but runs in dirs of its own
    assert specs["compile-artifact"].cache_key == specs["compile-cold"].cache_key
    assert _plan(cache="artifact", modes="eager,regional", steps=3)[-1].name == "regional-artifact"


def test_artifact_flags_plan(tmp_path: Path) -> None:
    (c,) = [
        c
        for c in _plan(modes="eager,compile", steps=3, save_cache_artifact=str(tmp_path / "a.bin"))
        if c.name == "compile-cold"
    ]
    assert TrainSpec.from_params(c.params).save_artifact == str(tmp_path / "a.bin")
    p = tmp_path / "warm.bin"
    spec = TrainSpec(mode="compile", batch=4, seq=256, steps=3, warmup=2)
    artifact.write(p, artifact.header_for(spec, "cpu", artifact.KIND_MEGA), b"x")
    cases = _plan(steps=3, load_cache_artifact=str(p))  # modes default to eager + the file's mode
    assert [c.name for c in cases] == ["eager", "compile-artifact"]
    assert TrainSpec.from_params(cases[1].params).artifact == str(p)


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({"cache": "all", "save_cache_artifact": "x.bin"}, "exactly one compiled mode"),
        ({"save_cache_artifact": "/no/such/dir/x.bin", "modes": "eager,compile"}, "no directory"),
        ({"nproc": 2, "modes": "eager,nested"}, "one rank only"),
        ({"nproc": 2, "cache": "artifact", "modes": "compile"}, "one rank only"),
        ({"load_cache_artifact": "/no/such/file"}, "cannot read"),
        ({"cache": "both", "load_cache_artifact": "PATH"}, "drop --cache"),
    ],
)
def test_bad_arm_plans_are_one_line(tmp_path: Path, kw: dict, needle: str) -> None:
    if kw.get("load_cache_artifact") == "PATH":
        p = tmp_path / "ok.bin"
        artifact.write(p, artifact.header_for(TrainSpec(mode="compile"), "cpu", artifact.KIND_MEGA), b"x")
        kw = {**kw, "load_cache_artifact": str(p)}
    with pytest.raises(BadInput) as e:
        _plan(steps=3, **kw)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_run_gets_the_artifact_flags(tmp_path: Path) -> None:
    from bringup.train import suite as train
    from tests.train.test_train_units import CPU

    cases = train.run_cases(CPU, quick=True)
    out = train.apply_artifact_flags(cases, str(tmp_path / "w.bin"), None, CPU)
    saved = [TrainSpec.from_params(c.params) for c in out if TrainSpec.from_params(c.params).save_artifact]
    assert [(s.mode, s.cache) for s in saved] == [("compile", "cold")]
    quick = TrainSpec.from_params(next(c for c in cases if c.name == "compile-cold").params)
    p = tmp_path / "w.bin"
    artifact.write(p, artifact.header_for(quick, "cpu", artifact.KIND_MEGA), b"x")
    names = [c.name for c in train.apply_artifact_flags(cases, None, str(p), CPU)]
    assert "compile-artifact" in names and "compile-cold" not in names and "regional-cold" in names
    artifact.write(p, {**artifact.header_for(quick, "cpu", artifact.KIND_MEGA), "seq": 4096}, b"x")
    with pytest.raises(BadInput, match="seq 4096"):
        train.apply_artifact_flags(cases, None, str(p), CPU)


def test_html_section_shows_each_arms_waterfall_and_the_step_n_advice() -> None:
    from types import SimpleNamespace

    from bringup.train import section

    def res(name: str, mode: str, cache: str, phases: dict) -> CaseResult:
        r = CaseResult(
            case_id=name,
            suite="train",
            name=name,
            status=Status.PASS,
            params={"mode": mode, "cache": cache, "model": "qwen3-tiny"},
        )
        r.metric("ttfs_s", phases["run_s"] + 0.1, "s")
        r.metric("step_s", 0.1, "s")
        r.fields["ttfs_phases"] = phases
        return r

    art = {"load_artifact_s": 0.3, "backend_s": 2.0, "run_s": 0.5}
    rs = [res("eager", "eager", "none", {"build_s": 1.0, "run_s": 0.2})]
    rs.append(res("compile-artifact", "compile", "artifact", art))
    page = SimpleNamespace(summary={"train": {"advice_steps": "fastest start (measured ...): step 1: eager (1.2 s)"}})
    html = section.render(rs, page)  # type: ignore[arg-type]
    assert "waterfall" in html and "load artifact" in html and "Fastest start (measured" in html
    assert [b[0] for b in section.job_bars(rs)] == ["eager", "compile (artifact)"]


def test_aot_compile_that_cannot_serialize_the_model_is_unsupported_with_its_reason(monkeypatch) -> None:
    """torch 2.13 on qwen3-tiny: `PackageError: ID_MATCH guard cannot be serialized.` (measured): a gap of
    this torch for this model, so `unsupported` naming it, not fail_compile."""
    import torch

    from bringup.checks.errors import classify
    from bringup.train import modes

    class PackageError(Exception):
        pass

    class Fake:
        def aot_compile(self, example: object) -> None:
            raise PackageError("ID_MATCH guard cannot be serialized.")

    monkeypatch.setattr(torch, "compile", lambda *a, **k: Fake())
    m = modes.AOTModel(torch.nn.Linear(2, 2), "inductor")
    with pytest.raises(NotImplementedError) as e:
        m(input_ids=torch.zeros(1, 2), labels=torch.zeros(1, 2))
    assert classify(e.value, compiling=True) is Status.UNSUPPORTED and "ID_MATCH guard" in str(e.value)


def test_a_rank_that_compiles_alone_is_named() -> None:
    from bringup.train.summary import record_ranks

    r = CaseResult(case_id="x", suite="train", name="compile-cold", status=Status.PASS)
    record_ranks(r, [30.0, 31.0, 29.5, 190.0])
    assert r.fields["slow_rank"].startswith("rank 3 compiled for 190 s") and r.value("rank_compile_skew_s") == 160.5
    ok = CaseResult(case_id="y", suite="train", name="compile-cold", status=Status.PASS)
    record_ranks(ok, [30.0, 31.0, 29.5, 33.0])
    assert "slow_rank" not in ok.fields and ok.value("rank_compile_skew_s") == pytest.approx(3.5)


# ---- ahead-of-time compile of a Hugging Face model ---------------------------------------------------
def _entry(guard_type: str, derived: tuple[str, ...] = (), is_global: bool = False) -> object:
    from types import SimpleNamespace

    return SimpleNamespace(guard_type=guard_type, derived_guard_types=derived, is_global=is_global)


def test_portable_guards_drop_what_cannot_be_serialized_and_keep_the_tensor_guards() -> None:
    """The guard that made every HF model `unsupported` (transformers' forward decorator: the wrapped
    function's `__code__`, a CONSTANT_MATCH built on an ID_MATCH) is dropped with its derived type; the
    guards that say what the compiled code may run on (tensors, shapes, global state) stay."""
    from bringup.train import modes

    entries = [
        _entry("TENSOR_MATCH"),
        _entry("SHAPE_ENV"),
        _entry("GLOBAL_STATE"),
        _entry("CONSTANT_MATCH", ("ID_MATCH",)),
        _entry("ID_MATCH", ("ID_MATCH",)),
        _entry("TENSOR_MATCH", is_global=True),
        _entry("CONSTANT_MATCH", ("EQUALS_MATCH",)),
    ]
    assert modes.portable_guards(entries) == [True, True, True, False, False, False, True]


def test_an_aot_artifact_whose_model_code_changed_is_one_line(tmp_path: Path, monkeypatch) -> None:
    """An AOT-compiled function keeps no guard on code, so the file records the traced modules' source:
    a model file edited since is refused (it would run the old code), an unchanged one fits."""
    import hashlib
    import importlib

    mod = tmp_path / "aot_model_src.py"
    mod.write_text("def f(x):\n    return x + 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("aot_model_src")
    digest = hashlib.sha256(mod.read_text().encode()).hexdigest()
    p = tmp_path / "aot.bin"
    spec = TrainSpec(mode="aot", batch=2, seq=64)
    head = {**artifact.header_for(spec, "cpu", artifact.KIND_AOT), "sources": {"aot_model_src": digest}}
    artifact.write(p, head, b"fn")
    assert artifact.check(p, spec.with_(cache="artifact"), "cpu")["kind"] == artifact.KIND_AOT
    mod.write_text("def f(x):\n    return x + 2\n")  # the model code changes after the file was made
    os.utime(mod, (1, 1))  # (a new mtime, whatever the clock's resolution: inspect re-reads the file)
    with pytest.raises(BadInput) as e:
        artifact.check(p, spec.with_(cache="artifact"), "cpu")
    msg = str(e.value)
    assert "\n" not in msg and "aot_model_src" in msg and "has changed" in msg and "old code" in msg
    artifact.write(p, {**head, "sources": {"no_such_module_anywhere": digest}}, b"fn")
    with pytest.raises(BadInput, match="no_such_module_anywhere"):
        artifact.check(p, spec, "cpu")


@pytest.mark.parametrize("backend", ["aot_eager", pytest.param("inductor", marks=pytest.mark.slow)])
def test_aot_compiles_an_hf_model_and_a_new_job_runs_it_with_nothing_compiled(
    cli, tmp_path: Path, backend: str
) -> None:
    """torch 2.13's aot_compile on a transformers Qwen3 (was `unsupported`: a guard it could not
    serialize, whatever the backend): the cold arm compiles ahead of time and saves the function; the
    artifact arm, a fresh worker with empty cache dirs, loads it and trains with no dynamo compile (and,
    with inductor, no C++ kernel built: ~30 s of kernel builds even at one layer, hence the cheap
    aot_eager form in the default run), on the eager loss curve. Counted, not timed."""
    p = cli(
        "--device",
        "cpu",
        "train",
        "--model",
        "qwen3-tiny",
        "--override",
        "num_hidden_layers=1",
        "--batch",
        "1",
        "--seq",
        "16",
        "--steps",
        "3",
        "--modes",
        "eager,aot",
        "--cache",
        "artifact",
        "--compile-backend",
        backend,
        "--json",
        "o.json",
        timeout=900,
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    rows = {c["name"]: c for c in json.loads((tmp_path / "o.json").read_text())["cases"]}
    assert {n: r["status"] for n, r in rows.items()} == {"eager": "pass", "aot-cold": "pass", "aot-artifact": "pass"}
    cold, art = rows["aot-cold"], rows["aot-artifact"]
    assert cold["compile_breakdown"]["total_s"] > 0 and cold["compile_breakdown"]["dynamo_s"] > 0
    assert "cache_warnings" not in cold and "cache_warnings" not in art
    assert art["compile_breakdown"]["total_s"] == 0 and art["artifact"]["kind"] == "aot-function"
    assert art["loss_reference"].startswith("eager case") and art["loss_check"]
    made = next(Path(cold["cache_dir"]).glob("artifact.bin"))
    assert "transformers.models.qwen3.modeling_qwen3" in artifact.read(made).header["sources"]
    if backend == "inductor":
        assert cold["compile_breakdown"]["backend_s"] > 0 and cold["cache_layers"]["compiled_kernels"]["built"] > 0
        k = art["cache_layers"]["compiled_kernels"]
        assert k["supplied"] == cold["cache_layers"]["compiled_kernels"]["built"] and k["built"] == 0, k


def test_an_artifact_job_adopts_the_vector_isa_its_kernels_were_built_with() -> None:
    """The maker's proven ISA pick is taken (no test programs built and loaded again) only when it is the
    pick this machine gives; any other name leaves inductor to prove its own. (Not monkeypatch: undoing
    its setattr on inductor's config deletes the entry, which hides `cpp.vec_isa_ok` for good, and every
    later inductor compile in this process fails reading it.)"""
    from torch._inductor import config, cpu_vec_isa

    saved = config.cpp.vec_isa_ok  # conftest's shortcut may have set it for the session
    try:
        config.cpp.vec_isa_ok = True  # what this machine's pick is, without proving it
        cpu_vec_isa.valid_vec_isa_list.cache_clear()
        mine = artifact.picked_vec_isa()
        config.cpp.vec_isa_ok = None
        assert not artifact.adopt_vec_isa("an ISA this machine does not pick") and config.cpp.vec_isa_ok is None
        before = config.save_config_portable()
        assert artifact.adopt_vec_isa(mine) and str(cpu_vec_isa.pick_vec_isa()) == mine
        # inductor's config (part of every FX graph cache key) is as it was: the mega-cache still hits
        assert config.save_config_portable() == before and config.cpp.vec_isa_ok is None
        assert not artifact.adopt_vec_isa("")  # an artifact without a recorded pick changes nothing
    finally:
        config.cpp.vec_isa_ok = saved
        cpu_vec_isa.valid_vec_isa_list.cache_clear()


def test_the_kernel_section_unpacks_in_a_thread_and_its_damage_is_one_line(tmp_path: Path, monkeypatch) -> None:
    import threading

    dirs = {"inductor": tmp_path / "i", "headers": tmp_path / "h"}
    monkeypatch.setattr(artifact, "kernel_dirs", lambda: dirs)
    section = _kernel_section({"inductor/ab/cabc.so": b"\x7fELF" * 1000, "headers/cdef.h.gch": b"pch" * 1000})
    seen: list[str] = []
    real = artifact.unpack_kernels

    def spy(*a: object, **k: object) -> dict[str, int]:
        seen.append(threading.current_thread().name)
        return real(*a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(artifact, "unpack_kernels", spy)
    assert artifact.unpack_kernels_meanwhile(section).result() == {"kernels": 1, "headers": 1}
    assert seen and seen[0] != threading.current_thread().name
    assert (dirs["inductor"] / "ab" / "cabc.so").read_bytes() == b"\x7fELF" * 1000
    for bad in (section[: len(section) // 2], section[:10] + b"\0" * 40 + section[50:], b"not gzip"):
        with pytest.raises(BadInput, match="damaged kernel section"):  # truncated, corrupt deflate, not gzip
            artifact.unpack_kernels_meanwhile(bad, "cache artifact x").result()


def test_kernels_refused_at_load_are_not_unpacked(tmp_path: Path, monkeypatch) -> None:
    from bringup.train import cache

    dirs = {"inductor": tmp_path / "i", "headers": tmp_path / "h"}
    monkeypatch.setattr(artifact, "kernel_dirs", lambda: dirs)
    p = tmp_path / "a.bin"
    _with_kernels(p, SPEC, cpu_capability="SVE256")
    with pytest.raises(BadInput, match="cpu_capability 'SVE256'"):
        cache.load(SPEC.with_(cache="artifact"), p, "cpu")
    assert not any(d.exists() and any(d.rglob("*")) for d in dirs.values())
    _with_kernels(p, SPEC)  # the same file made here: unpacked, and in place when load returns
    _, got = cache.load(SPEC.with_(cache="artifact"), p, "cpu")
    assert got["kernels_supplied"] == 1 and (dirs["inductor"] / "ab" / "cabc.so").exists()
