"""Broken parameter tying on the C++ test device: testdev tensors can't be shallow-copied from cpu ones,
so `model.to("testdev")` gives gpt2's lm_head its own Parameter apart from wte. The zoo names that as a
device finding (with the remedy) and judges parity on the re-tied model: no more
"grad.lm_head.weight: not in reference"."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import load_json


def test_zoo_gpt2_names_broken_tying_and_judges_the_retied_model(cli, tmp_path: Path, testdev_built: None) -> None:
    p = cli(
        "--import",
        "bringup.testdev",
        "--device",
        "testdev",
        "zoo",
        "--filter",
        "^gpt2$",
        "--steps",
        "2",
        "--compile-backend",
        "none",
        "--json",
        "out.json",
        timeout=1200,
    )
    assert p.returncode in (0, 1), p.stderr[-3000:]
    (c,) = load_json(tmp_path / "out.json")["cases"]
    assert c["tying_broken"] == [["transformer.wte.weight", "lm_head.weight"]], c
    assert c["broken_ties"] == 1
    assert "tying broken by .to(testdev" in c["reason"] and "tie_weights()" in c["reason"], c["reason"]
    assert "not in reference" not in c["reason"]  # the parity check saw the re-tied model
    assert c["status"] in ("pass", "fallback"), (c["status"], c["reason"])


def test_train_eager_names_broken_tying_and_checks_the_retied_model(cli, tmp_path: Path, testdev_built: None) -> None:
    """The same finding in train (the shared models/tying.py), on a tiny gpt2 config JSON."""
    cfg = tmp_path / "gpt2.json"
    cfg.write_text(
        '{"model_type": "gpt2", "n_embd": 32, "n_head": 2, "n_layer": 1, "vocab_size": 64, '
        '"n_positions": 64, "bos_token_id": 0, "eos_token_id": 0}'
    )
    p = cli(
        "--import",
        "bringup.testdev",
        "--device",
        "testdev",
        "train",
        "--model",
        str(cfg),
        "--modes",
        "eager",
        "--steps",
        "2",
        "--batch",
        "2",
        "--seq",
        "32",
        "--json",
        "out.json",
        timeout=900,
    )
    assert p.returncode in (0, 1), p.stderr[-3000:]
    (c,) = load_json(tmp_path / "out.json")["cases"]
    assert c["tying_broken"] == [["transformer.wte.weight", "lm_head.weight"]] and c["broken_ties"] == 1, c
    assert c["reason"].startswith("tying broken by .to(testdev") and "tie_weights()" in c["reason"]
    assert c["eager_check"]["ok"] is True and c["eager_check"]["reference"] == "cpu fp64", c["eager_check"]
    assert c["status"] in ("pass", "fallback"), (c["status"], c["reason"])
