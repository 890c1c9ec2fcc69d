"""Hub sweeps end to end through the real CLI (zoo/sweep.py, bringup/hub), against the local Hub stand-in with
synthetic repos (tests/hub/hub_standin.py, hub_synth.py): one case per signature, the verdict fanned out to
every id, config failures by reason, the store's ids -> signature -> case, the CSV and the report, resume,
--baseline per signature, the Ray executor, and --full-top sharded with FSDP2 over 2 ranks."""

from __future__ import annotations

import csv
import gzip
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, assert_one_line_error, load_json, run_cli
from tests.hub import hub_synth as hs
from tests.hub.hub_standin import StandIn

ZOO_TESTS = Path(__file__).resolve().parent.parent / "zoo"  # perturb_backend.py (--import perturb_backend)
# A sweep's mechanics (fan-out, store, CSV, resume), not the verdict rules: the whole-model rule decides here, the
# module check (~20 s of module compiles a sweep) is tests/zoo/test_zoo_cli.py's and tests/checks/'s business.
FAST = ("--noise-seeds", "0", "--steps", "2", "--hub-rate", "1000,100000", "--module-check", "off")


@pytest.fixture(scope="module")
def synth() -> hs.SynthHub:
    h = hs.generate()
    for r in h.repos:
        r.flaky = 0  # retries are test_hub_fetch.py's business
    return h


@pytest.fixture(scope="module")
def hub(synth: hs.SynthHub) -> Any:
    with StandIn(synth.repos, page_size=50) as s:
        yield s


def _env(hub: StandIn, tmp: Path) -> dict[str, str]:
    return {
        "HF_ENDPOINT": hub.url,
        "HF_HUB_CACHE": str(tmp / "hf"),
        "HF_HUB_OFFLINE": "",
        "PYTHONPATH": os.pathsep.join([str(ZOO_TESTS), str(REPO), os.environ.get("PYTHONPATH", "")]),
    }


def zoo(hub: StandIn, tmp: Path, *args: str, rc: int | None = None, pre: tuple[str, ...] = ()) -> dict[str, Any]:
    out = tmp / f"zoo-{len(list(tmp.glob('zoo-*.json')))}.json"
    run_cli(
        ["--device", "cpu", "--db", str(tmp / "b.db"), *pre, "zoo", *args, "--json", str(out)],
        cwd=tmp,
        env=_env(hub, tmp),
        timeout=900,
        check_rc=rc,
    )
    return load_json(out)


def _ids(synth: hs.SynthHub, pred: Any) -> list[hs.Repo]:
    return [r for r in synth.repos if pred(r)]


def _store_rows(db: Path, run_id: str) -> list[dict[str, Any]]:
    from bringup.store import Store

    with Store(db, create=False) as st:
        return st.hub_ids(run_id)


def test_sweep_fans_out_verdicts_by_signature(
    hub: StandIn, synth: hs.SynthHub, tmp_path: Path, bringup_inproc: Any
) -> None:
    """A sweep whose compiler is 1% off on gelu/silu/relu outputs: the Llama signature (silu) fails, for every id
    that shares it (copies, resized variants), and its near-duplicate (another eps) fails on its own case; GPT-2
    (gelu_new, computed with tanh: nothing perturbed) passes with graph breaks; broken repos are config failures
    by reason. The store links every id to its case; the CSV has every id; the report shows it; a resumed
    run answers the same. `hub csv` and `report` read the store only: in process (bringup_inproc)."""
    keep = (
        r"^(meta-llama/base-0(-\w+)?|user\d+/ft0-\d|lab0/near-0-1|openai-community/base-12(-\w+)?|user\d+/ft12-\d"
        r"|broken0/.*)$"
    )
    data = zoo(
        hub,
        tmp_path,
        "--source",
        "hub-search:",
        "--filter",
        keep,
        *FAST,
        "--compile-backend",
        "perturb_act_aot_eager",
        rc=1,
        pre=("--import", "perturb_backend"),
    )
    h = data["hub"]
    llama = _ids(synth, lambda r: r.expect == "sig:0")
    gpt2 = _ids(synth, lambda r: r.expect == "sig:12")
    near = _ids(synth, lambda r: r.id == "lab0/near-0-1")
    broken = _ids(synth, lambda r: r.id.startswith("broken0/") and not r.private)
    assert h["ids"] == len(llama) + len(gpt2) + len(near) + len(broken)
    assert h["signatures"] == 3 and len(data["cases"]) == 3
    ov = h["overall"]
    assert ov["fail_numeric"]["ids"] == len(llama) + 1
    assert ov["fail_numeric"]["downloads"] == sum(r.downloads for r in llama + near)
    assert ov["graph_breaks"]["ids"] + ov["pass"]["ids"] == len(gpt2)
    assert ov["config"]["ids"] == len(broken)
    assert {k: v["ids"] for k, v in h["config_failures"].items()} == {
        "gated": 1,
        "missing_config": 1,
        "bad_config": 2,
        "unknown_model_type": 1,
        "custom_code": 1,
    }
    worst = h["worst"][0]
    assert worst["status"] == "fail_numeric" and worst["ids"] == len(llama) and worst["case"].startswith("meta-llama/")
    archs = {a["architecture"]: a for a in h["by_architecture"]}
    assert archs["LlamaForCausalLM"]["signatures"] == 2 and archs["GPT2LMHeadModel"]["ids"] == len(gpt2)
    # the store: ids -> signature -> case, and the case carries that signature
    rows = _store_rows(tmp_path / "b.db", data["run_id"])
    cases = {c["case_id"]: c for c in data["cases"]}
    for row in rows:
        if row["config_status"] == "ok":
            assert cases[row["case_id"]]["signature"] == row["signature"]
            assert row["case_status"] == cases[row["case_id"]]["status"]
        else:
            assert row["case_id"] is None and row["signature"] is None
    with open(h["csv"]) as f:
        per_id = {r["model_id"]: r for r in csv.DictReader(f)}
    assert set(per_id) == {r.id for r in llama + gpt2 + near + broken}
    assert all(per_id[r.id]["outcome"] == "fail_numeric" for r in llama)
    assert per_id["broken0/gated-0"]["outcome"] == "config" and per_id["broken0/gated-0"]["status"] == "gated"
    # the CSV again, from the store alone; the report
    db = str(tmp_path / "b.db")
    p = bringup_inproc("--db", db, "hub", "csv", data["run_id"], "--out", str(tmp_path / "again.csv"))
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "again.csv").read_text() == Path(h["csv"]).read_text()
    p = bringup_inproc("--db", db, "report", data["run_id"], "--out", str(tmp_path / "r.html"))
    assert p.returncode == 0, p.stderr
    html = (tmp_path / "r.html").read_text()
    assert "Hub sweep:" in html and "hub-ids.csv" in html and "worst offenders" in html
    # resume: forget the GPT-2 case's result; `--resume RUN` runs it again and answers for every id again
    gcase = next(c for c in data["cases"] if c["name"].startswith("openai-community/"))
    with sqlite3.connect(tmp_path / "b.db") as c:
        c.execute("DELETE FROM cases WHERE case_id = ?", (gcase["case_id"],))
    out = tmp_path / "resumed.json"
    p = run_cli(
        ["--db", str(tmp_path / "b.db"), "--resume", data["run_id"], "--json", str(out)],
        cwd=tmp_path,
        env=_env(hub, tmp_path),
        timeout=900,
        check_rc=1,
    )
    assert "1 unfinished case" in p.stdout
    again = load_json(out)["hub"]
    assert again["overall"] == h["overall"]


def _list_file(tmp: Path, name: str, repos: list[hs.Repo]) -> Path:
    f = tmp / name
    f.write_text("".join(f"{r.id} downloads={r.downloads}\n" for r in repos))
    return f


def test_baseline_compares_per_signature(hub: StandIn, synth: hs.SynthHub, tmp_path: Path, bringup_inproc: Any) -> None:
    """The trusted machine sweeps one id list and exports; the device under test sweeps another list (other
    ids of the same two signatures, and a signature the bundle lacks) against it: compared per signature. The
    bundle's Llama curve is made 1% off: that signature's case (and its ids) fail_numeric "baseline:", GPT-2's
    is compared and agrees, BERT's is not in the bundle. `export` (no device work) runs in process."""
    first = _list_file(
        tmp_path, "a.txt", [r for r in synth.repos if r.id in ("meta-llama/base-0", "openai-community/base-12")]
    )
    a = zoo(hub, tmp_path, "--source", f"hub-list:{first}", *FAST, "--compile-backend", "none", rc=0)
    bundle = tmp_path / "trusted.json"
    assert bringup_inproc("--db", str(tmp_path / "b.db"), "export", a["run_id"], "--out", str(bundle)).returncode == 0
    data = json.loads(bundle.read_text())
    llama = next(c for c in data["cases"] if c["name"].startswith("meta-llama/"))
    llama["series"]["loss.eager"] = [[i, v * 1.01] for i, v in llama["series"]["loss.eager"]]
    bundle.write_text(json.dumps(data))
    other = [r for r in synth.repos if r.kind in ("copy", "resized") and r.expect == "sig:0"][:3]
    other += [r for r in synth.repos if r.kind in ("copy", "resized") and r.expect == "sig:12"][:2]
    other += [r for r in synth.repos if r.id == "google-bert/base-19"]
    second = _list_file(tmp_path, "b.txt", other)
    b = zoo(
        hub,
        tmp_path,
        "--source",
        f"hub-list:{second}",
        *FAST,
        "--compile-backend",
        "none",
        "--baseline",
        str(bundle),
        rc=1,
    )
    base = b["hub"]["baseline"]
    assert base["compared"] == 2 and base["differs"] == 1 and base["not_in_bundle"] == 1, base
    assert base["ids"]["differs"]["ids"] == 3 and base["ids"]["ok"]["ids"] == 2, base
    assert base["ids"]["not in the bundle"]["ids"] == 1
    bad = [x for x in b["cases"] if x["status"] != "pass"]
    assert len(bad) == 1 and bad[0]["status"] == "fail_numeric" and bad[0]["reason"].startswith("baseline:"), bad
    assert b["hub"]["overall"]["fail_numeric"]["ids"] == 3 and b["hub"]["overall"]["pass"]["ids"] == 3


@pytest.mark.slow  # the Ray executor's verdicts: tests/reliability/test_fault_injection.py::test_faults_ray_executor
@pytest.mark.xdist_group("ray")
def test_sweep_on_ray(hub: StandIn, synth: hs.SynthHub, tmp_path: Path) -> None:
    """The distinct signatures run on the Ray executor (a local instance, 2 slots); the answer is the same."""
    repos = [r for r in synth.repos if r.expect == "sig:1"][:4] + [r for r in synth.repos if r.expect == "sig:19"][:4]
    f = _list_file(tmp_path, "ids.txt", repos)
    data = zoo(
        hub,
        tmp_path,
        "--source",
        f"hub-list:{f}",
        *FAST,
        "--compile-backend",
        "none",
        rc=0,
        pre=("--executor", "ray", "--workers", "2"),
    )
    assert data["hub"]["signatures"] == 2 and data["hub"]["overall"]["pass"]["ids"] == len(repos)


def test_full_top_shards_a_model_too_big_for_one_device(hub: StandIn, tmp_path: Path) -> None:
    """--full-top 1 on a 3.4M-parameter Llama with the device said to have 60 MiB: the preflight (72 MB) says
    it does not fit; without --nproc it is unsupported and names the 2 ranks it needs; with --nproc 2 it runs
    FSDP2 over 2 gloo ranks, each holding half the parameters, and its per-parameter grad norms at step 0 equal
    the unsharded model's (computed here, in this process) to 1e-6: the same function, sharded."""
    import random

    from bringup.hub import refs

    cfg = dict(next(e for e in refs.catalogue() if e["id"] == "meta-llama/Llama-3.2-1B")["config"])
    cfg.update(
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=4096,
        max_position_embeddings=512,
    )
    cfg.pop("head_dim", None)
    repo = hs._config_repo("acme/small-llama", cfg, "causal-lm", 1000, random.Random(0))
    f = tmp_path / "ids.txt"
    f.write_text("acme/small-llama downloads=1000\n")
    with StandIn([repo]) as s:
        args = (
            "--source",
            f"hub-list:{f}",
            "--full-top",
            "1",
            "--device-memory",
            "0.06",
            *FAST,
            "--compile-backend",
            "none",
        )
        two = zoo(s, tmp_path, *args, "--nproc", "2", rc=0)
    full = next(c for c in two["cases"] if c.get("size") == "full")
    assert full["status"] == "pass" and full["preflight"]["fits"] is False, (full["status"], full["reason"])
    # the same case on one rank stops at the preflight: unsupported, naming the ranks it needs
    from bringup.case import Case, Status
    from bringup.device import Device

    one = Case(
        "zoo",
        "x",
        {
            k: v
            for k, v in full.items()
            if k
            in (
                "source",
                "model",
                "task",
                "dtype",
                "steps",
                "backend",
                "seed",
                "size",
                "batch",
                "seq",
                "weights",
                "reference",
                "hub_config",
                "device_memory_gib",
            )
        },
        "bringup.zoo.full:run_full",
    )
    ctx = type("Ctx", (), {"device": Device("cpu"), "artifact_dir": tmp_path / "a", "imports": ()})()
    r = zoo_full_run(one, ctx)
    assert r.status is Status.UNSUPPORTED and "--nproc 2" in r.reason, r.reason
    sh = full["sharded"]
    assert sh["nproc"] == 2 and [r["local_params"] for r in sh["ranks"]] == [sh["params"] // 2] * 2
    assert full["cpu_reference"]["status"] == "ok" and "eager vs cpu fp32" in full["compared"]
    assert two["hub"]["full"][0]["sharded"] is True
    import torch

    from bringup.precision import parse_precision
    from bringup.zoo import full as zoo_full

    ref = zoo_full.run_steps(full, cfg, torch.device("cpu"), parse_precision("fp32"), 1).grad_norms0
    got = full["grad_norms0"]["eager"]
    assert set(got) == set(ref) and zoo_full.vector_dev(got, ref) < 1e-6


def zoo_full_run(case: Any, ctx: Any) -> Any:
    from bringup.zoo import full as zoo_full

    return zoo_full.run_full(case, ctx)


def test_hub_sweep_bad_inputs(
    hub: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Planning refuses bad input before any work (BadInput: one line, exit 2): checked in process through the
    real parser and the suite's planning, and through the CLI for two of them."""
    from bringup.api import get_suite
    from bringup.cli import build_parser, parse_options
    from bringup.device import Device
    from bringup.errors import BadInput

    for k, v in _env(hub, tmp_path).items():
        monkeypatch.setenv(k, v)
    suite = get_suite("zoo")
    assert suite is not None
    ids = tmp_path / "ids.txt"
    ids.write_text("org/ok\nnot an id\n")
    db = str(tmp_path / "b.db")
    for args, needle in (
        (["zoo", "--source", "hub-search:sort=stars"], "sort="),
        (["zoo", "--source", "hub-search:a,b"], "two search texts"),
        (["zoo", "--source", f"hub-list:{ids}"], "ids.txt:2"),
        (["zoo", "--source", "hub-list:/nonexistent/ids.txt"], "cannot read"),
        (["zoo", "--source", "hf-causal", "--full-top", "2"], "--full-top needs"),
        (["zoo", "--source", "hub-search:", "--size", "full"], "--full-top"),
        (["zoo", "--source", "hub-search:", "--hub-rate", "9"], "--hub-rate"),
        (["zoo", "--source", "hub-search:", "--nproc", "2"], "apply to full-size runs"),
        (["zoo", "--source", "hub-search:", "--reference", "cpu"], "--reference"),
        (["zoo", "--source", "hub-search:", "--full-top", "1", "--nproc", "3"], "does not split over --nproc 3"),
        (["zoo", "--source", "hub-top", "--size", "full", "--nproc", "4", "--batch", "6"], "use a multiple of 4"),
        (["zoo", "--source", "hub-search:", "--full-top", "1", "--seq", "1"], "--seq >= 2"),
    ):
        with pytest.raises(BadInput, match=needle.replace("+", r"\+")):  # where the options are built, or planning
            suite.build_cases(parse_options(["--db", db, *args]), Device("cpu"))
    for flag, value in (("--nproc", "0"), ("--device-memory", "-1"), ("--hub-workers", "0")):  # by their types
        with pytest.raises(SystemExit) as exc:
            build_parser().parse_args(["--db", db, "zoo", "--source", "hub-search:", flag, value])
        assert exc.value.code == 2 and flag in capsys.readouterr().err
    from types import SimpleNamespace

    from bringup.zoo import args as zoo_args

    two = SimpleNamespace(is_cpu=False, type="xpu", count=lambda: 2)  # --nproc beyond the device's units
    with pytest.raises(BadInput, match="only 2 xpu device"):
        zoo_args.check_ranks(4, two)
    zoo_args.check_ranks(2, two)
    zoo_args.check_ranks(8, Device("cpu"))  # cpu ranks are processes
    env = _env(hub, tmp_path)
    p = run_cli(["--device", "cpu", "--db", db, "zoo", "--source", f"hub-list:{ids}"], cwd=tmp_path, env=env)
    assert_one_line_error(p, "ids.txt:2")
    bad = tmp_path / "x.jsonl.gz"
    bad.write_bytes(gzip.compress(b'{"format": "something-else"}\n'))
    p = run_cli(["--db", db, "hub", "import", str(bad)], cwd=tmp_path, env=env)
    assert_one_line_error(p, "not a bringup Hub index export")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(BadInput, match="HF_HUB_OFFLINE"):
        suite.build_cases(parse_options(["--db", db, "zoo", "--source", "hub-search:never"]), Device("cpu"))
