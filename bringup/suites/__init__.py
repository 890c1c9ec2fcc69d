"""The built-in suites. Each module registers one `bringup.api.Suite` (its name, help, options, planning,
terminal summary, HTML section and metrics) with `register_suite`; `bringup.api.BUILTIN` lists them.

The helpers below are the old module-by-name interface, now read from the registry (kept for callers
that still use them).
"""

from __future__ import annotations

from typing import Any


def available() -> dict[str, str]:
    """Registered suites that offer a command: name -> the module that registered it."""
    from bringup.api import suites

    return {s.name: s.module for s in suites() if s.command}


def load(name: str) -> Any:
    """The registered suite `name` (a `bringup.api.Suite`: build_cases, run_cases, summarize, ...)."""
    from bringup.api import get_suite

    s = get_suite(name)
    if s is None:
        raise KeyError(name)
    return s


def run_order() -> tuple[str, ...]:
    """Suites `bringup run` includes, in their order (selftest is a harness check, not a device verdict)."""
    from bringup.api import suites

    return tuple(s.name for s in suites() if s.run_cases is not None)
