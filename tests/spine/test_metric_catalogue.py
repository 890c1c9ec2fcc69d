"""The metric catalogue: one definition per metric, and every metric bringup records is defined there
with the unit it is recorded in (CaseResult.metric records the catalogue's name and unit)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import bringup
from bringup.case import CaseResult, Status
from bringup.metrics import MetricSpec, metric_spec, metric_specs, register_metric

ROOT = Path(bringup.__file__).parent
UNCATALOGUED_OK = {"pid", "spin_result"}  # selftest's harness probes: not device measurements


def _recorded() -> list[tuple[str, str, str]]:
    out = []
    for p in sorted(ROOT.rglob("*.py")):
        for n in ast.walk(ast.parse(p.read_text())):
            call = isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "metric"
            if call and n.args and isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str):
                unit = n.args[2] if len(n.args) > 2 else None
                out.append(
                    (str(p.relative_to(ROOT)), n.args[0].value, unit.value if isinstance(unit, ast.Constant) else "")
                )
    return out


def test_every_recorded_metric_is_catalogued_with_its_unit() -> None:
    rec = _recorded()
    assert len(rec) > 40
    for where, name, unit in rec:
        spec = metric_spec(name)
        assert spec is not None or name in UNCATALOGUED_OK, f"{where}: metric {name!r} is not in the catalogue"
        assert spec is None or spec.name == name, f"{where}: {name!r} is an old alias; record {spec.name!r}"
        assert spec is None or unit in ("", spec.unit), f"{where}: {name} recorded in {unit!r}, catalogue {spec.unit!r}"


def test_one_definition_per_metric_and_aliases_resolve() -> None:
    names = [s.name for s in metric_specs()]
    aliases = [a for s in metric_specs() for a in s.aliases]
    assert len(set(names)) == len(names) and not set(aliases) & set(names)
    assert metric_spec("loss_max_rel_dev") is metric_spec("loss_divergence")
    assert metric_spec("mfu").unit == "fraction" and metric_spec("mfu").display(0.0123) == pytest.approx(1.23)
    with pytest.raises(ValueError, match="already defined"):
        register_metric(MetricSpec("mfu", "%", True, "mfu in percent"))
    with pytest.raises(ValueError, match="unknown unit"):
        MetricSpec("x", "furlongs", None, "")


def test_recording_uses_the_catalogue() -> None:
    r = CaseResult("c", "train", "n", Status.PASS)
    r.metric("loss_max_rel_dev", 0.5)  # an old name is recorded under the catalogue's
    r.metric("mfu", 0.1, "%")  # the catalogue's unit wins over a caller's guess
    r.metric("my_plugin_thing", 3, "x")  # not catalogued: kept as given
    assert {k: (m.value, m.unit) for k, m in r.metrics.items()} == {
        "loss_divergence": (0.5, ""),
        "mfu": (0.1, "fraction"),
        "my_plugin_thing": (3.0, "x"),
    }
    old = CaseResult.from_json({**r.to_json(), "metrics": {"loss_max_rel_dev": [0.25, ""]}})
    assert old.value("loss_divergence") == 0.25 and old.value("mfu") is None
