"""bisect's pure parts: a repro's verdict from its exit and output, the flaky rule, requirement sets and env
keys, pip's one-line reason, the LRU pruning of the env cache, release-notes links, the options round trip."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import pytest

from bringup.bisect.envs import EnvCache, EnvRequest, pip_reason
from bringup.bisect.plan import FLAKY, SKIP
from bringup.bisect.target import RunOutcome, figures, repro_outcome, verdict_of

MQA_2_11 = """aot_eager  k/v broadcast (B, 1, S, D)   input-grad rel error vs eager: 0
/tmp/c/cgf.main.cpp:121:187: error: 'tmp5' was not declared in this scope
Traceback (most recent call last):
  File "/work/main/bench/repros/inductor_mqa_sdpa_grad.py", line 66, in <module>
    sys.exit(main())
torch._inductor.exc.InductorError: CppCompileError: C++ compile error

Set TORCHDYNAMO_VERBOSE=1 for the internal stack trace (please do this especially if you're reporting a bug)
"""


def test_a_repro_exit_code_is_its_verdict() -> None:
    ok = repro_outcome(0, "scale error: 0.0\ntorch 2.9.0: fixed\n", False, 1.0, 60, "fail_numeric")
    assert (ok.status, ok.reason, ok.figures) == ("pass", "torch 2.9.0: fixed", {"scale error": 0.0})
    bad = repro_outcome(1, "inductor rel error vs eager: 0.548\nBUG PRESENT\n", False, 1.0, 60, "fail_compile")
    assert bad.status == "fail_compile" and bad.reason == "BUG PRESENT (exit 1)"
    assert bad.figures == {"inductor rel error vs eager": 0.548}
    assert repro_outcome(125, "no such API here\n", False, 1.0, 60, "fail_numeric").status == SKIP
    assert repro_outcome(-9, "", False, 1.0, 60, "fail_numeric").reason == "killed by SIGKILL"
    late = repro_outcome(-9, "", True, 61.0, 60, "fail_numeric")
    assert (late.status, late.reason) == ("budget", "over the run budget (60 s)")


def test_an_uncaught_exception_is_error_not_the_bug() -> None:
    """torch prints hints below the traceback; the exception line (and a C++ compiler's first error) is what
    the reason keeps, and the verdict is `error`, not the failing status the bisection was told."""
    r = repro_outcome(1, MQA_2_11, False, 1.0, 60, "fail_numeric")
    assert r.status == "error"
    assert "InductorError: CppCompileError" in r.reason and "'tmp5' was not declared" in r.reason


def test_figures_are_label_number_lines() -> None:
    text = "plugin 0.4.0\nscale error: 0.010000000000000009\nnot: a number\n  inductor  x: 1e-3  \n"
    assert figures(text) == {"scale error": pytest.approx(0.01), "inductor x": 1e-3}


def _o(status: str) -> RunOutcome:
    return RunOutcome(status, "", 0, 0.1)


def test_the_flaky_rule_is_expects() -> None:
    assert verdict_of([_o("pass"), _o("pass")]) == "pass"
    assert verdict_of([_o("pass"), _o("fail_numeric")]) == FLAKY
    assert verdict_of([_o(SKIP)]) == SKIP and verdict_of([]) == SKIP
    assert verdict_of([_o("pass"), _o(SKIP)]) == FLAKY


def test_equal_requirement_sets_share_one_env(tmp_path: Path) -> None:
    from bringup.bisect.spec import normalize

    a = EnvRequest(tuple(sorted(normalize(r) for r in ["Torch == 2.9.0", "numpy<2,>=1.24"])))
    b = EnvRequest(tuple(sorted(normalize(r) for r in ["numpy>=1.24,<2", "torch==2.9.0"])))
    assert a.key == b.key
    assert EnvRequest(("torch==2.9.1",)).key != EnvRequest(("torch==2.9.0",)).key
    assert EnvRequest(("torch==2.9.0",), inherit=("/x",)).key != EnvRequest(("torch==2.9.0",)).key


def test_pip_reason_is_one_line_with_the_constraint() -> None:
    out = (
        "Collecting torch==2.15.0\nERROR: Cannot install torch==2.15.0 because these package versions have "
        "conflicting dependencies.\n\nThe conflict is caused by:\n    The user requested torch==2.15.0\n"
        "    The user requested (constraint) torch<=2.14.1\n"
    )
    why = pip_reason(out)
    assert why.startswith("Cannot install torch==2.15.0") and "(constraint) torch<=2.14.1" in why
    assert "\n" not in why


def _fake_env(cache: EnvCache, key: str, size: int, last_used: float) -> None:
    (cache.root / key).mkdir()
    meta = {"key": key, "size_bytes": size, "last_used": last_used, "installed": {}, "build_s": 1.0}
    (cache.root / key / "bringup-env.json").write_text(json.dumps(meta))


def test_the_cache_drops_least_recently_used_envs_not_in_use(tmp_path: Path) -> None:
    import fcntl

    cache = EnvCache(tmp_path, max_gb=2.5)
    now = time.time()
    for i, key in enumerate(["a", "b", "c", "d"]):
        _fake_env(cache, key, 1_000_000_000, now + i)  # a is the least recently used
    (tmp_path / "half").mkdir()  # a build killed half-way: no metadata, not counted
    with open(tmp_path / "b.lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_SH)  # b is in use
        removed = cache.prune(keep={"d"})
    assert removed == ["a", "c"] and sorted(m["key"] for m in cache.complete()) == ["b", "d"]
    assert cache.total_bytes() == 2_000_000_000


def test_options_are_built_once_and_round_trip(tmp_path: Path) -> None:
    from bringup.bisect.args import BisectOptions, add_arguments
    from bringup.options import GlobalOptions

    p = argparse.ArgumentParser()
    add_arguments(p)
    ns = p.parse_args(["repro.py", "--between", "torch==2.9.0", "torch", "--repeat", "3", "--env-cache", str(tmp_path)])
    opts = BisectOptions.take(vars(ns)).checked()
    assert opts.between == ("torch==2.9.0", "torch") and opts.repeat == 3 and opts.env_cache_dir() == str(tmp_path)
    common = GlobalOptions(workers=2, executor="local")
    assert BisectOptions.from_json(json.loads(json.dumps(opts.to_json(common)))) == (
        opts,
        GlobalOptions(workers=2, executor="local"),
    )
    # a bisection stored before the options had one shape resumes with its own
    old = {**opts.as_dict(), "build_budget_s": 7.0, "target_imports": ["plug"], "workers": 3, "executor": "local"}
    del old["build_budget"], old["target_import"]
    got, launch = BisectOptions.from_json({**old, "ray_address": None, "env_cache": str(tmp_path)})
    assert got.build_budget == 7.0 and got.target_import == ("plug",) and launch.workers == 3


def test_release_notes_from_the_metadata_else_the_github_release() -> None:
    from bringup.bisect.envs import Env
    from bringup.bisect.run import release_notes
    from bringup.bisect.spec import Candidate

    torch_urls = {"torch": {"Homepage": "https://pytorch.org", "Repository": "https://github.com/pytorch/pytorch"}}
    env = Env("k", Path("/x"), False, 0.0, 0, {"torch": "2.10.0"}, torch_urls)
    c = Candidate("torch==2.10.0", ("torch==2.10.0",), "2.10.0")
    assert release_notes(env, c) == "https://github.com/pytorch/pytorch/releases/tag/v2.10.0"
    env.urls = {"numpy": {"release notes": "https://numpy.org/doc/stable/release"}}
    assert (
        release_notes(env, Candidate("numpy==2.0.0", ("numpy==2.0.0",), "2.0.0")) == env.urls["numpy"]["release notes"]
    )
    assert release_notes(env, Candidate("a b", ("torch==2.9.0", "torchvision==0.24.0"))) is None  # a set: no version


def test_a_moved_pin_is_refused() -> None:
    from bringup.bisect.envs import EnvFailed

    req = EnvRequest(("torch==2.9.0",))
    EnvCache._check_pin("torch", "==2.9.0", {"version": "2.9.0+cu128"}, req)  # a local build of the pin is the pin
    with pytest.raises(EnvFailed, match="pip moved a pinned package: torch ==2.9.0 asked, 2.13.0 installed"):
        EnvCache._check_pin("torch", "==2.9.0", {"version": "2.13.0"}, req)
    url = "file:///w/bringup_fakeplugin-0.4.0-py3-none-any.whl#sha256=00"
    with pytest.raises(EnvFailed, match="0.4.0 asked, 0.3.0 installed"):
        EnvCache._check_pin("bringup-fakeplugin", url, {"version": "0.3.0"}, req)


def test_which_follow_ups_run_and_where(tmp_path: Path) -> None:
    from bringup.bisect.cli import followup_plan
    from bringup.bisect.plan import AMBIGUOUS, EVERY, FOUND, NO_CHANGE, Conclusion
    from bringup.bisect.spec import BisectSpec, Settings, Target

    compiled = tmp_path / "c.py"
    compiled.write_text("import torch\nf = torch.compile(lambda x: x)\n")
    eager = tmp_path / "e.py"
    eager.write_text("import re\nre.compile('x')\n")
    settings = Settings(1, 1.0, 1.0, str(tmp_path), 1.0, (), "fail_numeric")
    zoo = {
        "suite": "zoo",
        "name": "llama",
        "params": {"source": "hf-causal", "model": "llama", "dtype": "float32", "backend": "inductor"},
    }
    for target, kinds in (
        (Target("repro", str(compiled)), ["compiler_bisect"]),
        (Target("repro", str(eager)), []),
        (Target("case", case=zoo), ["compiler_bisect", "localize"]),
    ):
        spec = BisectSpec((), target, settings)
        assert [k for _, k in followup_plan(spec, Conclusion(FOUND, "pass", "fail_numeric", 2, 3))] == kinds
    spec = BisectSpec((), Target("case", case=zoo), settings)
    assert Target("case", case=zoo).zoo_model["source"] == "hf"
    # the failing side: the first new version, or, for a fix (new verdict pass), the last old one
    assert {i for i, _ in followup_plan(spec, Conclusion(FOUND, "fail_compile", "pass", 5, 6))} == {5}
    assert {i for i, _ in followup_plan(spec, Conclusion(AMBIGUOUS, "pass", "fail_numeric", 1, 6, (2, 3, 6)))} == {6}
    assert followup_plan(spec, Conclusion(NO_CHANGE, "pass", "pass")) == []
    # --all, every candidate failing the same way: on the newest one
    assert {i for i, _ in followup_plan(spec, Conclusion(EVERY, "fail_compile", "fail_compile", newest=8))} == {8}
    assert followup_plan(spec, Conclusion(EVERY, "pass", "pass", newest=8)) == []
    off = BisectSpec((), Target("case", case=zoo), settings, compiler_bisect="off", localize="off")
    assert followup_plan(off, Conclusion(FOUND, "pass", "fail_numeric", 2, 3)) == []
