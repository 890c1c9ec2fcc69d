"""Suites turn user options into Cases (pure: no device work) and summarise their results.

A suite is a module with:
    HELP: str                                             one line for `bringup --help`
    add_arguments(p: argparse.ArgumentParser) -> None     its sub-command's options
    build_cases(args, device: Device) -> list[Case]       validate (raise BadInput) and plan
    run_cases(device: Device, quick: bool) -> list[Case]  what `bringup run [--quick|--full]` includes
    summarize(results: list[CaseResult], console) -> dict print its table; return its top-level JSON
and case entry functions `fn(case, ctx) -> CaseResult` that the worker calls.
"""

from __future__ import annotations

import importlib
from types import ModuleType

# Order = the order `bringup run` runs them in (devices -> probe -> train -> flex -> zoo -> ops -> profile).
SUITES: dict[str, str] = {
    "smoke": "bringup.suites.smoke",
    "probe": "bringup.suites.probe",
    "train": "bringup.suites.train",
    "flex": "bringup.suites.flex",
    "zoo": "bringup.suites.zoo",
    "ops": "bringup.suites.ops",
    "profile": "bringup.suites.profile",
    "selftest": "bringup.suites.selftest",
}

# Suites `bringup run` includes (selftest is a harness check, not a device verdict).
RUN_ORDER: tuple[str, ...] = ("smoke", "probe", "train", "flex", "zoo", "ops", "profile")


def available() -> dict[str, str]:
    """Suites whose module exists in this checkout."""
    out = {}
    for name, mod in SUITES.items():
        if importlib.util.find_spec(mod) is not None:
            out[name] = mod
    return out


def load(name: str) -> ModuleType:
    return importlib.import_module(SUITES[name])
