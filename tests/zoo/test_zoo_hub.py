"""Hub models by id, the hub-top catalogue, --size full, the memory preflight and full-size baselines.

Every Hub model here is a tiny one saved with `save_pretrained` into a Hub-style cache in a temp dir
(tests/zoo/hubcache.py) and loaded by id with HF_HUB_OFFLINE=1: no network.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.conftest import REPO, assert_one_line_error, load_json, run_cli
from tests.testdev.conftest import testdev_built  # noqa: F401  (a fixture: builds the C++ test device once)
from tests.zoo import hubcache

HERE = Path(__file__).resolve().parent


def _env(cache: Path) -> dict[str, str]:
    return {
        "HF_HUB_CACHE": str(cache),
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": os.pathsep.join([str(HERE), str(REPO), os.environ.get("PYTHONPATH", "")]),
    }


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    c = tmp_path_factory.mktemp("hf-cache")
    hubcache.add_model(c, "acme/tiny-llama", hubcache.tiny_llama())  # config + safetensors
    hubcache.add_model(c, "acme/tiny-bert", hubcache.tiny_bert(), weights=False)  # config only
    return c


def zoo(tmp: Path, cache: Path, *args: str, rc: int | None = None) -> dict[str, Any]:
    out = tmp / f"zoo-{len(list(tmp.glob('zoo-*.json')))}.json"
    run_cli(["--device", "cpu", *args, "--json", str(out)], cwd=tmp, env=_env(cache), timeout=900, check_rc=rc)
    return load_json(out)


def by_name(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in data["cases"]}


# ---- pure parts -----------------------------------------------------------------------------------
def test_parse_ids() -> None:
    from bringup.errors import BadInput
    from bringup.hub.refs import HubRef, parse_ids

    assert parse_ids("hub:meta-llama/Llama-3.2-1B,gpt2@main") == [
        HubRef("meta-llama/Llama-3.2-1B"),
        HubRef("gpt2", "main"),
    ]
    for bad in ("hub:", "hub:a/b/c", "hub:bad//id", "hub:-x/y", "hub:a b"):
        with pytest.raises(BadInput):
            parse_ids(bad)


def test_task_from_architectures() -> None:
    from bringup.hub.build import task_of

    cases = {
        "LlamaForCausalLM": "causal-lm",
        "BertForMaskedLM": "masked-lm",
        "T5ForConditionalGeneration": "seq2seq-lm",
        "WhisperForConditionalGeneration": "speech-seq2seq",
        "ViTForImageClassification": "image-classification",
        "ASTForAudioClassification": "audio-classification",
        "Wav2Vec2ForCTC": "ctc",
        "BertForSequenceClassification": "sequence-classification",
    }
    for arch, task in cases.items():
        assert task_of({"architectures": [arch], "model_type": "x"}) == (task, arch), arch
    assert task_of({"model_type": "vit"})[0] == "image-classification"  # no architectures: the type's first task


def test_catalogue_configs_reproduce_published_param_counts() -> None:
    """>= 40 entries, unique ids; every config builds (meta device) with the parameter count its card
    states, within 2%: a wrong hidden size, layer count, head layout or vocabulary moves it."""
    from bringup.hub.build import meta_model
    from bringup.hub.refs import catalogue

    entries = catalogue()
    ids = [e["id"] for e in entries]
    assert len(ids) >= 40 and len(set(ids)) == len(ids)
    tasks = set()
    for e in entries:
        model, task = meta_model(e["config"], e["id"])
        tasks.add(task)
        n = sum(p.numel() for p in model.parameters())
        want = e.get("params_built", e["params_published"])
        assert abs(n / want - 1) < 0.02, (e["id"], n, want)
    assert {"causal-lm", "masked-lm", "seq2seq-lm", "image-classification", "speech-seq2seq"} <= tasks


def test_catalogue_count_check_has_power() -> None:
    """The check above fails on a config one hyperparameter off (here: intermediate size 10% low)."""
    from bringup.hub.build import meta_model
    from bringup.hub.refs import catalogue

    e = next(x for x in catalogue() if x["id"] == "meta-llama/Llama-3.1-8B")
    cfg = {**e["config"], "intermediate_size": int(e["config"]["intermediate_size"] * 0.9)}
    n = sum(p.numel() for p in meta_model(cfg, "x")[0].parameters())
    assert abs(n / e["params_published"] - 1) > 0.02


def test_tiny_keeps_gqa_ratio_rope_and_experts() -> None:
    from bringup.hub.build import make_config, tiny_config_of
    from bringup.hub.refs import catalogue

    cat = {e["id"]: e["config"] for e in catalogue()}
    t = tiny_config_of(make_config(cat["meta-llama/Llama-3.1-8B"], "x"))  # 32:8 -> 4:1
    assert (t.num_attention_heads, t.num_key_value_heads) == (4, 1)
    assert t.rope_parameters["rope_type"] == "llama3"
    m = tiny_config_of(make_config(cat["Qwen/Qwen3-30B-A3B"], "x"))
    assert m.num_experts > 1 and m.num_experts_per_tok > 1


def test_full_init_is_seeded_and_buffers_are_real() -> None:
    """Meta-device build + init: the same seed gives the same weights, another seed others; the
    buffers transformers computes in __init__ (rope inv_freq) equal a plain build's (a meta build that
    left them uninitialised would not)."""
    from bringup.hub.build import build_full

    data = hubcache.tiny_llama().config.to_dict()
    a, _, how = build_full(data, "t", torch.device("cpu"), torch.float32, seed=1)
    b, _, _ = build_full(data, "t", torch.device("cpu"), torch.float32, seed=1)
    c, _, _ = build_full(data, "t", torch.device("cpu"), torch.float32, seed=2)
    assert "seeded init" in how
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not torch.equal(sa["model.layers.0.mlp.up_proj.weight"], sc["model.layers.0.mlp.up_proj.weight"])
    plain = hubcache.tiny_llama()
    for name, buf in plain.named_buffers():
        assert torch.allclose(dict(a.named_buffers())[name], buf), name
    w = sa["model.layers.0.self_attn.q_proj.weight"]
    assert 0.015 < float(w.std()) < 0.025  # transformers' initializer_range 0.02
    assert float(sa["model.norm.weight"].min()) == 1.0  # norm weights keep transformers' init


def test_full_loads_cached_safetensors(cache: Path) -> None:
    from bringup.hub.build import build_full

    snap = cache / "models--acme--tiny-llama" / "snapshots" / hubcache.REV
    data = json.loads((snap / "config.json").read_text())
    model, _, how = build_full(
        data, "acme/tiny-llama", torch.device("cpu"), torch.float32, 0, weights=[str(snap / "model.safetensors")]
    )
    want = hubcache.tiny_llama().state_dict()
    assert "cached safetensors" in how
    got = model.state_dict()
    assert all(torch.equal(got[k], want[k]) for k in want if not k.endswith("inv_freq"))


def test_preflight_numbers_and_nproc() -> None:
    from bringup.hub.build import meta_model
    from bringup.hub.refs import catalogue
    from bringup.models.memory import GIB, estimate

    e = next(x for x in catalogue() if x["id"] == "meta-llama/Llama-3.1-8B")
    m, _ = meta_model(e["config"], e["id"])
    est = estimate(m, torch.bfloat16, torch.bfloat16, batch=1, seq=2048, free_bytes=80 * GIB)
    assert est.params == pytest.approx(8.03e9, rel=0.01)
    assert est.param_bytes == est.grad_bytes == est.params * 2 and est.optimizer_bytes == 2 * est.param_bytes
    assert est.fits() is False  # 8B in bf16 with AdamW: 64 GB of state + activations > 90% of 80 GiB
    assert est.suggested_nproc() == 2
    assert estimate(m, torch.bfloat16, torch.bfloat16, 1, 2048, free_bytes=None).fits() is None
    assert "needs" in est.summary() and "AdamW" in est.summary()


# ---- planning, in process (cheap): the Hub cache of the fixture, offline ------------------------
@pytest.fixture
def offline_cache(cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return cache


def plan(*argv: str) -> list[Any]:
    from bringup.cli import parse_options
    from bringup.device import resolve_device
    from bringup.zoo import plan as zp

    return zp.build_cases(parse_options(["zoo", *argv]), resolve_device("cpu"))


def test_planning_bad_input_is_one_clear_line(offline_cache: Path, tmp_path: Path) -> None:
    from bringup.errors import BadInput

    (c,) = plan("--source", "hub:acme/tiny-bert")
    assert c.params["task"] == "masked-lm" and c.params["source"] == "hub"
    f = tmp_path / "ids.txt"
    f.write_text("acme/tiny-llama\nnot an id\n")
    for argv, needle in (
        (["--source", str(f)], "ids.txt:2: 'not an id' is neither"),
        (["--source", "hub:acme/tiny-llama@v9"], "hf download acme/tiny-llama config.json --revision v9"),
        (["--source", "hub:acme/tiny-llama", "--reference", "cpu"], "--reference applies to --size full"),
        (
            ["--source", "hub:acme/tiny-llama", "--size", "full", "--reference", "none", "--compile-backend", "none"],
            "nothing would judge",
        ),
        (["--source", "hub:acme/tiny-llama", "--size", "full", "--reference", "baseline"], "needs --baseline"),
        (["--source", "hf-causal", "--size", "full"], "lists no Hub model"),
    ):
        with pytest.raises(BadInput, match=re.escape(needle)):
            plan(*argv)
    full = plan("--source", "hub:acme/tiny-llama,acme/tiny-bert", "--size", "full")
    assert [c.params["weights"] for c in full] == ["cache", "random"]  # the bert snapshot has no safetensors
    assert all(c.isolated and c.params["reference"] == "cpu" for c in full)
    # --case-budget: each size's own default when not given; what is given, even the tiny default, is kept
    assert [c.budget_s for c in full] == [3600.0, 3600.0]
    given = plan("--source", "hub:acme/tiny-llama", "--size", "full", "--case-budget", "600")
    assert [c.budget_s for c in given] == [600.0]
    assert [c.budget_s for c in plan("--source", "hub:acme/tiny-llama")] == [600.0]
    assert [c.budget_s for c in plan("--source", "hub:acme/tiny-llama", "--case-budget", "90")] == [90.0]


# ---- end to end, offline ------------------------------------------------------------------------
def test_hub_ids_tiny_offline_and_uncached_id(tmp_path: Path, cache: Path) -> None:
    """By id through the cache, offline, from a list file: a causal LM and (from architectures) a
    masked LM pass at tiny size against float64; an uncached id is one line naming it and the
    pre-fetch command."""
    f = tmp_path / "ids.txt"
    f.write_text("# my models\nacme/tiny-llama\nhub:acme/tiny-bert@main\n")
    data = zoo(
        tmp_path,
        cache,
        "zoo",
        "--source",
        str(f),
        "--steps",
        "2",
        "--compile-backend",
        "none",
        "--noise-seeds",
        "0",
        rc=0,
    )
    cases = by_name(data)
    assert cases["acme/tiny-llama"]["task"] == "causal-lm" and cases["acme/tiny-llama"]["status"] == "pass"
    assert cases["acme/tiny-bert@main"]["task"] == "masked-lm" and cases["acme/tiny-bert@main"]["status"] == "pass"
    assert cases["acme/tiny-llama"]["max_rel_err"] < 1e-4
    p = run_cli(
        ["--device", "cpu", "zoo", "--source", "hub:acme/tiny-llama,acme/not-cached"], cwd=tmp_path, env=_env(cache)
    )
    assert_one_line_error(p, "hub:acme/not-cached: config.json is not in the Hugging Face cache")
    assert "hf download acme/not-cached config.json" in p.stderr and "HF_HUB_OFFLINE" in p.stderr


@pytest.mark.usefixtures("testdev_built")
def test_full_size_baseline_round_trip(tmp_path: Path, offline_cache: Path, bringup_inproc: Any) -> None:
    """--size full on cpu: cached weights, compiled vs eager; exported, it is the baseline of a bf16 run
    (pass: the tolerance is both precisions' loss_rel); a compiler 1% off fails compiled vs eager, and a
    bundle whose loss is 1% off fails the baseline comparison; a bundle of another shape is refused.
    `export` and the refused bundle (no device work) run in process (bringup_inproc)."""
    cache = offline_cache
    first = zoo(
        tmp_path,
        cache,
        "zoo",
        "--source",
        "hub:acme/tiny-llama",
        "--size",
        "full",
        "--steps",
        "2",
        "--compile-backend",
        "aot_eager",
        rc=0,
    )
    (c,) = first["cases"]
    assert c["status"] == "pass" and c["weights"] == "cache" and "cached safetensors" in c["weights_from"], c
    assert c["compared"] == ["compiled vs eager"] and c["preflight"]["fits"] is True
    assert c["memory"]["predicted_bytes"] > 0 and c["memory"]["measured_bytes"] > 0
    bundle = tmp_path / "bundle.json"
    assert bringup_inproc("export", first["run_id"], "--out", str(bundle)).returncode == 0
    bf16 = zoo(
        tmp_path,
        cache,
        "zoo",
        "--source",
        "hub:acme/tiny-llama",
        "--size",
        "full",
        "--steps",
        "2",
        "--dtype",
        "bf16",
        "--compile-backend",
        "none",
        "--baseline",
        str(bundle),
        rc=0,
    )
    (c,) = bf16["cases"]
    assert c["status"] == "pass" and c["reference"] == "baseline", c
    assert c["baseline_check"]["status"] == "ok" and c["baseline_check"]["tolerance"] == pytest.approx(5e-2 + 1e-4)
    assert c["baseline_check"]["eager_max_rel_dev"] > 0  # bf16 vs fp32: not the same numbers, within tolerance
    b = json.loads(bundle.read_text())
    case = b["cases"][0]
    case["series"]["loss.eager"] = [[i, v * 1.01] for i, v in case["series"]["loss.eager"]]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(b))
    data = zoo(
        tmp_path,
        cache,
        "--import",
        "perturb_backend",
        "zoo",
        "--source",
        "hub:acme/tiny-llama",
        "--size",
        "full",
        "--steps",
        "2",
        "--compile-backend",
        "perturb_mm_aot_eager",
        "--baseline",
        str(bad),
        "--reference",
        "none",
        rc=1,
    )
    (c,) = data["cases"]
    assert c["status"] == "fail_numeric" and c["reason"].startswith("compiled: vs eager"), c
    assert c["baseline_check"]["status"] == "differs", c["baseline_check"]
    assert c["baseline_check"]["eager_max_rel_dev"] > 5e-3  # the edited 1% (eager itself is right)
    # a wrong device: testdev with silu 1% off (BRINGUP_TESTDEV_FAULTS) fails against the cpu fp32
    # reference AND against the cpu bundle; the same device without the fault agrees with both (its
    # status is `fallback`: testdev runs some ops through the CPU fallback, a finding of its own)
    td = [
        "--import",
        "bringup.testdev",
        "--device",
        "testdev",
        "zoo",
        "--source",
        "hub:acme/tiny-llama",
        "--size",
        "full",
        "--steps",
        "2",
        "--compile-backend",
        "none",
        "--reference",
        "cpu",
        "--baseline",
        str(bundle),
    ]
    for faults in ("scale:silu=1.01", ""):
        out = tmp_path / f"td-{bool(faults)}.json"
        run_cli(
            [*td, "--json", str(out)], cwd=tmp_path, env={**_env(cache), "BRINGUP_TESTDEV_FAULTS": faults}, check_rc=1
        )
        (c,) = load_json(out)["cases"]
        assert c["compared"] == ["eager vs cpu fp32", "eager vs the cpu bundle"], c
        want = "differs" if faults else "ok"
        assert c["cpu_reference"]["status"] == want and c["baseline_check"]["status"] == want, c
        if faults:
            assert c["status"] == "fail_numeric" and c["reason"].startswith("eager: vs cpu fp32"), c
            assert c["cpu_reference"]["max_rel_dev"] > 5e-4  # the per-parameter grad norms carry the 1% (bound 2e-4)
        else:
            assert c["status"] == "fallback" and c["cpu_reference"]["max_rel_dev"] < 1e-5, c
    p = bringup_inproc(
        "--device",
        "cpu",
        "zoo",
        "--source",
        "hub:acme/tiny-llama",
        "--size",
        "full",
        "--seq",
        "32",
        "--baseline",
        str(bundle),
    )
    assert_one_line_error(p, "seq=64 in the bundle")


def test_full_size_preflight_unsupported() -> None:
    """Llama-3.1-70B at full size can't fit this machine: the worker says unsupported, with the numbers
    and how many devices FSDP2 sharding would need, before building anything (in process: the worker
    function itself)."""
    import time
    from contextlib import nullcontext

    from bringup.case import Case
    from bringup.device import resolve_device
    from bringup.zoo.full import ENTRY, run_full

    class Ctx:
        device = resolve_device("cpu")

        def phase(self, name: str, budget_s: float | None = None) -> Any:
            return nullcontext()

    params = {
        "source": "hub-top",
        "model": "meta-llama/Llama-3.1-70B",
        "task": "causal-lm",
        "dtype": "bf16",
        "steps": 1,
        "backend": "none",
        "seed": 0,
        "size": "full",
        "batch": 1,
        "seq": 128,
        "weights": "random",
        "reference": "cpu",
    }
    t0 = time.monotonic()
    r = run_full(Case("zoo", params["model"], params, ENTRY), Ctx())
    assert r.status.value == "unsupported" and r.reason.startswith("memory preflight: needs"), r.reason
    assert "FSDP2" in r.reason and r.fields["preflight"]["fits"] is False
    assert r.fields["preflight"]["params"] > 70e9 and time.monotonic() - t0 < 60


@pytest.mark.slow
def test_catalogue_smallest_full_size_against_baseline(tmp_path: Path, cache: Path) -> None:
    """The catalogue's smallest entry at its real size on cpu, exported, then judged against that bundle."""
    args = ["zoo", "--source", "hub-top", "--filter", "bert_uncased_L-2_H-128_A-2", "--size", "full", "--steps", "2"]
    first = zoo(tmp_path, cache, *args, "--compile-backend", "aot_eager", rc=0)
    bundle = tmp_path / "b.json"
    run_cli(["export", first["run_id"], "--out", str(bundle)], cwd=tmp_path, check_rc=0)
    data = zoo(tmp_path, cache, *args, "--compile-backend", "none", "--baseline", str(bundle), rc=0)
    (c,) = data["cases"]
    assert c["status"] == "pass" and c["baseline_check"]["status"] == "ok", c


def test_logits_digest_over_16m_elements() -> None:
    """Full-size logits (batch 4 x 512 x 49k vocab = 100M values): the sample positions stay in range
    (float32 positions rounded the last one past the end: an IndexError in every such run)."""
    from bringup.zoo.run import logits_digest

    x = torch.arange(2**25 + 3, dtype=torch.float32)
    d = logits_digest(x)
    assert d is not None and d["sample"][-1] == float(x[-1]) and len(d["sample"]) == 16
