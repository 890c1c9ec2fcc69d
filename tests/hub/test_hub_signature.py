"""The signature of a config (hub/signature.py), tested in both directions on real tiny builds:

- same signature -> the same computed graph: every fine-tune copy and resized variant of a base (tests/zoo/
  hub_synth.py) builds, through its own tiny build (`hub.build_tiny` of its own config.json), the same aten
  graph, module tree and buffers as the base (tests/hub/graphprint.py);
- one graph field changed (activation, eps, biases, tying, rope theta / scaling, sliding window, kv heads,
  soft-cap) -> another signature AND another graph;
- the case's build from the signature's config is the id's own tiny build (fidelity), and every key NON_GRAPH
  takes out leaves the graph as it is.
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest

from tests.hub import graphprint as gp
from tests.hub import hub_synth as hs


@pytest.fixture(scope="module", autouse=True)
def _quiet() -> None:
    from bringup.hub import signature as sg

    sg.quiet_transformers()


def _cat() -> dict[str, dict[str, Any]]:
    from bringup.hub import refs

    return {e["id"]: e["config"] for e in refs.catalogue()}


def _fp(raw: dict[str, Any]) -> dict[str, Any]:
    from bringup.hub import build

    return gp.fingerprint(build.build_tiny(raw, "t", seed=0))


# A cheap, varied sample for the default run (dense GQA + rope, MoE, sliding/global layers, learned positions,
# encoder, encoder-decoder, vision, speech); the slow test takes every base.
SAMPLE = (
    "meta-llama/Llama-3.1-8B",
    "Qwen/Qwen3-30B-A3B",
    "google/gemma-2-2b",
    "google-bert/bert-base-uncased",
    "google-t5/t5-small",
)


def _both_directions(bases: tuple[str, ...]) -> None:
    from bringup.hub import signature as sg

    cat = _cat()
    with_near = 0
    for bid in bases:
        base = cat[bid]
        sb = sg.sign(base)
        assert isinstance(sb, sg.Signature), (bid, sb)
        fb = _fp(base)
        rng = random.Random(0)
        same = [("copy", hs._noise(base, rng, "someone/else"))] + hs.resized_variants(base)
        for what, cfg in same:
            s = sg.sign(cfg)
            assert isinstance(s, sg.Signature) and s.signature == sb.signature, (bid, what)
            f = _fp(cfg)
            assert f == fb, (bid, what, gp.first_difference(f, fb))
        near = hs.near_variants(base)
        with_near += bool(near)
        for what, cfg in near:
            s = sg.sign(cfg)
            assert isinstance(s, sg.Signature) and s.signature != sb.signature, (bid, what)
            f = _fp(cfg)
            assert f != fb, (bid, what, "a graph field changed but the graph did not")
    assert with_near >= len(bases) - 1  # (whisper's catalogue config names none of the fields near_variants edits)


def test_same_signature_same_graph_and_one_field_changes_both() -> None:
    _both_directions(SAMPLE)


@pytest.mark.slow
def test_both_directions_on_every_base() -> None:
    _both_directions(hs.BASES)


def test_the_case_builds_what_the_id_would() -> None:
    """Fidelity: the signature's config (what the case carries) builds the id's own tiny graph."""
    from bringup.hub import signature as sg

    cat = _cat()
    for bid in (
        "meta-llama/Llama-3.1-8B",
        "Qwen/Qwen1.5-MoE-A2.7B",
        "openai/whisper-tiny",
        "HuggingFaceTB/SmolLM3-3B",
        "google/vit-base-patch16-224",
    ):
        s = sg.sign(cat[bid])
        assert isinstance(s, sg.Signature)
        a = _fp(cat[bid])
        b = gp.fingerprint(sg.build(s.task, s.config, seed=0))
        assert a == b, (bid, gp.first_difference(a, b))


def test_excluded_keys_do_not_change_the_graph() -> None:
    """Every NON_GRAPH key, given another value, leaves the tiny build's graph as it is (the signature
    ignores them); use_cache, which is not excluded, changes it (the test can see a graph change)."""
    from bringup.hub import signature as sg

    cat = _cat()
    llama, bert = cat["meta-llama/Llama-3.1-8B"], cat["google-bert/bert-base-uncased"]
    variants = {
        "_name_or_path": "org/other",
        "name_or_path": "org/other",
        "_commit_hash": "f" * 40,
        "transformers_version": "4.30.0",
        "dtype": "bfloat16",
        "torch_dtype": "float16",
        "id2label": {"0": "a", "1": "b", "2": "c"},
        "label2id": {"a": 0, "b": 1, "c": 2},
        "initializer_range": 0.006,
        "quantization_config": {"quant_method": "gptq", "bits": 4},
        "auto_map": {"AutoModelForCausalLM": "modeling_llama.LlamaForCausalLM"},
    }
    assert set(variants) | {"architectures"} == set(sg.NON_GRAPH)
    for base, keys in ((llama, list(variants)), (bert, ["id2label", "initializer_range", "dtype"])):
        fb = _fp(base)
        sb = sg.sign(base)
        for k, v in ((k, variants[k]) for k in keys):
            cfg = {**base, k: v}
            s = sg.sign(cfg)
            assert isinstance(s, sg.Signature) and s.signature == sb.signature, k
            f = _fp(cfg)
            assert f == fb, (k, gp.first_difference(f, fb))
    from bringup.hub import build

    on = gp.fingerprint(build.build_tiny({**llama}, "t"))
    cfg = build.tiny_config_of(build.make_config(llama, "t"))
    cfg.use_cache = True
    from bringup.models import tiny as mz

    off = gp.fingerprint(mz.build_hf("llama", "causal-lm", seed=0, cfg=cfg))
    assert on != off  # the fingerprint sees a graph-only change (the kv-cache path)


def test_signature_is_canonical_and_memoised() -> None:
    from bringup.hub import signature as sg

    base = _cat()["meta-llama/Llama-3.1-8B"]
    shuffled = dict(reversed(list(copy.deepcopy(base).items())))
    a, b = sg.sign(base), sg.sign(shuffled)
    assert isinstance(a, sg.Signature) and isinstance(b, sg.Signature) and a.signature == b.signature
    assert len(a.signature) == 16 and json.loads(sg.canonical(a.config)) == a.config
    signer = sg.Signer()
    rng = random.Random(1)
    for i in range(20):
        assert signer(hs._noise(base, rng, f"u/{i}")).signature == a.signature  # type: ignore[union-attr]
    assert signer.signed == 1  # names, versions, storage dtype and use_cache: one signing
    assert sg.full_key(base) == sg.full_key(hs._noise(base, rng, "x")) != sg.full_key({**base, "vocab_size": 3})


def test_config_failures_by_reason() -> None:
    from bringup.hub import signature as sg

    llama = _cat()["meta-llama/Llama-3.1-8B"]
    cases = {
        "bad_config": {"hidden_size": 64},
        "unknown_model_type": {"model_type": "acme_future", "architectures": ["AcmeFutureForCausalLM"]},
        "unknown_architecture": {**llama, "architectures": ["LlamaForSomethingNew"]},
        "custom_code": {**llama, "architectures": ["AcmeForCausalLM"], "auto_map": {"AutoModel": "m.Acme"}},
        "tiny_config": {**llama, "num_attention_heads": 0},
    }
    for reason, cfg in cases.items():
        got = sg.sign(cfg)
        assert isinstance(got, sg.ConfigFailure) and got.reason == reason, (reason, got)
    # auto_map beside a class transformers has: transformers' class is what from_pretrained loads: signed
    assert isinstance(sg.sign({**llama, "auto_map": {"AutoModelForCausalLM": "m.X"}}), sg.Signature)


def test_fields_come_from_the_config_class() -> None:
    from bringup.hub import signature as sg

    e = sg.explain("llama")
    assert e["config_class"] == "LlamaConfig"
    assert {
        "hidden_act",
        "rms_norm_eps",
        "attention_bias",
        "mlp_bias",
        "rope_parameters",
        "tie_word_embeddings",
    } <= set(e["graph"])
    assert {"hidden_size", "num_hidden_layers", "num_key_value_heads"} <= set(e["sizes"])
    assert "initializer_range" in e["excluded"] and "initializer_range" not in e["graph"]
    m = sg.explain("mixtral")
    assert {"num_local_experts", "num_experts_per_tok"} <= set(m["sizes"]) and "sliding_window" in m["graph"]
