"""A compiled run (`localize --compile-backend`), on cpu: a compiler that scales every activation
(gelu/silu/relu) by 1.01 (tests/zoo/perturb_backend.py) is localized to llama's MLP activation, each
module compiled alone and judged by the module check; the same with the honest aot_eager localizes
nothing."""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import REPO, assert_one_line_error, load_json

ENV = {"PYTHONPATH": os.pathsep.join([str(REPO / "tests" / "zoo"), str(REPO), os.environ.get("PYTHONPATH", "")])}
CPU = ("--device", "cpu", "--import", "perturb_backend")


def test_perturbed_compiler_is_localized_to_a_region_that_holds_the_op(cli, tmp_path: Path) -> None:
    p = cli(*CPU, "localize", "llama", "--compile-backend", "perturb_act_aot_eager", "--json", "l.json", env=ENV)
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-3000:]
    c = load_json(tmp_path / "l.json")["cases"][0]
    assert c["first_module"] is None  # eager on the device is right: the compiler is what's wrong
    assert c["compiled_region"] == "model.layers.0.mlp.act_fn", c["regions_tried"]
    tried = {t["module"]: t["ok"] for t in c["regions_tried"]}
    assert tried["model.layers.0.self_attn"] is True and tried["model.layers.0.mlp"] is False
    assert "first divergence (compiled, perturb_act_aot_eager): model.layers.0.mlp.act_fn, out.0" in p.stdout


def test_honest_compiler_localizes_nothing(cli, tmp_path: Path) -> None:
    p = cli(*CPU, "localize", "llama", "--compile-backend", "aot_eager", "--json", "l.json", env=ENV)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    c = load_json(tmp_path / "l.json")["cases"][0]
    assert c["status"] == "pass" and c["compiled_region"] is None and len(c["regions_tried"]) >= 2


def test_unknown_backend_is_one_line(cli) -> None:
    assert_one_line_error(
        cli("--device", "cpu", "localize", "llama", "--compile-backend", "nope"), "unknown --compile-backend"
    )
