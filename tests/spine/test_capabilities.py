"""A new capability is one package and one line (`bringup.api.CAPABILITIES`): what it offers is found by
module name (suite.py, args.py, run_options.py, post_run.py), so no other list can forget it."""

from __future__ import annotations

from bringup.api import BUILTIN, BUILTIN_ARGS, BUILTIN_POST_RUN, BUILTIN_RUN_OPTIONS, CAPABILITIES, post_runs, tools
from tests.conftest import REPO


def _on_disk(module: str) -> set[str]:
    return {p.parent.name for p in (REPO / "bringup").glob(f"*/{module}.py")}


def test_every_capability_package_is_one_line() -> None:
    names = {c.split(".")[1] for c in CAPABILITIES}
    assert len(names) == len(CAPABILITIES)  # one line each
    assert names == _on_disk("suite"), "a package with a suite.py is missing from api.CAPABILITIES (or the reverse)"
    for role in ("args", "run_options", "post_run"):
        assert _on_disk(role) <= names, f"{role}.py in a package that is not a capability"
    assert set(BUILTIN) == {f"{c}.suite" for c in CAPABILITIES}
    assert set(BUILTIN_ARGS) == {f"{c}.args" for c in CAPABILITIES}
    assert set(BUILTIN_RUN_OPTIONS) == {f"{c}.run_options" for c in CAPABILITIES}
    assert set(BUILTIN_POST_RUN) == {"bringup.expect.gate"} | {f"{c}.post_run" for c in CAPABILITIES}


def test_what_the_packages_offer_is_found_by_name() -> None:
    """The tools and post-run steps come from the packages' conventional modules, not from a list."""
    assert {(t.name, t.module) for t in tools()} >= {("port", "bringup.port.cli"), ("hub", "bringup.hub.cli")}
    assert {s.name for s in post_runs()} >= {"expect", "localize"}
