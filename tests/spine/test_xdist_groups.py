"""`make test` runs with `--dist loadgroup`: the tests of one `xdist_group` go to one worker (the parity and
module-check files build their float64 references and trusted runs once per worker; one Ray instance at a time).
xdist marks a group by a `@group` suffix on the test's id; pytest 9.2 made that id structured and xdist 3.8's suffix
silently stopped taking effect (pytest-dev/pytest-xdist#1386), so every group was spread over the workers and each
rebuilt what it caches. This fails where the grouping does not hold."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.xdist_group("xdist_probe")


def test_a_group_reaches_the_scheduler(request: pytest.FixtureRequest) -> None:
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not under pytest-xdist --dist loadgroup")
    assert request.node.nodeid.endswith("@xdist_probe"), (
        f"{request.node.nodeid}: xdist's group suffix was lost (pytest {pytest.__version__}): xdist_group does not "
        "hold, see pyproject.toml's pin of pytest"
    )
