"""bisect's command-line face: `bringup bisect TARGET ...` is a tool (a command that plans its cases round by
round itself), listed here torch-free so that `bringup --help` offers it (bringup.api.tools), with its one
options shape, `BisectOptions`: each field its flag, help, check and whether it changes what is measured; the
parser is built from the fields, the options once from the parsed command line and checked there (nothing
below this face reads the parser's namespace). The bisection's spec (spec.py: candidates, target, Settings) is
what these options resolve to, stored with the run.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bringup.api import Tool
from bringup.case import Status
from bringup.errors import BadInput
from bringup.options import (
    CommandOptions,
    GlobalOptions,
    add_options,
    flag,
    measured,
    not_measured,
    positive_float,
    positive_int,
)

NAME = "bisect"
ORDER = 97
HELP = "name the release that broke a case: bisect it across torch, backend and library versions"
TOOLS = (Tool(NAME, "bringup.bisect.cli", HELP, device=False),)

ENV_CACHE_VAR = "BRINGUP_ENV_CACHE"
DEFAULT_REPEAT = 2
DEFAULT_BUILD_BUDGET_S = 1800.0
DEFAULT_RUN_BUDGET_S = 900.0
DEFAULT_CACHE_MAX_GB = 40.0
DEFAULT_FOLLOWUP_BUDGET_S = 3600.0
FAIL_STATUSES = ("fail_numeric", "fail_compile", "unsupported", "fallback", "silent_eager")


def default_env_cache() -> str:
    """$BRINGUP_ENV_CACHE, else ~/.cache/bringup/envs (XDG_CACHE_HOME honoured)."""
    if os.environ.get(ENV_CACHE_VAR):
        return os.environ[ENV_CACHE_VAR]
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return str(Path(base) / "bringup" / "envs")


CANDIDATES, SEARCH, ENVS, FOLLOWUP = (
    "candidates (one of)",
    "search",
    "environments",
    "on the first changed candidate",
)  # the --help groups
# the stored options of a bisection started before its options had one shape: old key -> field
_OLD_KEYS = {
    "target_imports": "target_import",
    "build_budget_s": "build_budget",
    "run_budget_s": "run_budget",
    "followup_budget_s": "followup_budget",
}
_LAUNCH = ("workers", "executor", "ray_address")  # the global options a bisection is driven with, stored with it


def check_new_verdict(name: str | None) -> None:
    """--new-verdict: a status a candidate can have (ref_fail is a skip, not a verdict)."""
    if name is None:
        return
    try:
        status = Status(name)
    except ValueError:
        raise BadInput(f"--new-verdict {name!r}: not a status ({', '.join(s.value for s in Status)})") from None
    if status in (Status.REF_FAIL,):
        raise BadInput("--new-verdict ref_fail: a candidate that says nothing is a skip, not a verdict")


@dataclass(frozen=True)
class BisectOptions(CommandOptions):
    """`bringup bisect`'s options (bringup/cli.py builds them; triage builds its own for each group); stored
    with the run (`to_json`, with the global options it is driven with) and read back on --resume."""

    target: str | None = measured(
        None,
        flag=flag(
            "target",
            nargs="?",
            metavar="TARGET",
            help="a repro script (exit 0: good, 1: the bug is there, 125: cannot test this version), or "
            "a case of a stored run: its case id or suite/name (--from RUN_ID; default the latest run "
            "that has it)",
        ),
    )
    between: tuple[str, ...] | None = measured(
        None,
        flag=flag(
            "--between",
            group=CANDIDATES,
            nargs=2,
            metavar=("OLD", "NEW"),
            help="the releases the index lists from OLD to NEW, e.g. torch==2.9.0 torch==2.13.0 (a bare "
            "name as NEW: the newest listed); with --wheels: the range of the directory's builds",
        ),
    )
    wheels: str | None = measured(
        None,
        flag=flag(
            "--wheels",
            group=CANDIDATES,
            metavar="DIR",
            help="a directory of wheels of one package (a plugin's builds), in version order",
        ),
    )
    sets: tuple[str, ...] = measured(
        (),
        flag=flag(
            "--set",
            group=CANDIDATES,
            action="append",
            metavar="REQS",
            help="an explicit requirement set, e.g. 'torch==2.9.0 torchvision==0.24.0' (packages that "
            "move together); repeat it, in order",
        ),
    )
    sets_file: str | None = measured(
        None,
        flag=flag(
            "--sets",
            group=CANDIDATES,
            metavar="FILE",
            help="requirement sets from FILE, one per line, in order (# comments)",
        ),
    )
    with_reqs: tuple[str, ...] = measured(
        (),
        flag=flag(
            "--with",
            group=CANDIDATES,
            action="append",
            metavar="REQ",
            help="a requirement installed beside every candidate (e.g. 'numpy<2'); repeatable",
        ),
    )
    pre: bool = measured(
        False, flag=flag("--pre", group=CANDIDATES, action="store_true", help="index releases: include pre-releases")
    )
    every: bool = measured(
        False,
        flag=flag(
            "--all",
            group=SEARCH,
            action="store_true",
            help="run every candidate (no bisection): each verdict and every change",
        ),
    )
    repeat: int = measured(
        DEFAULT_REPEAT,
        "runs per candidate: a flake is judged on them",
        flag=flag(
            "--repeat",
            group=SEARCH,
            type=positive_int,
            metavar="N",
            help=f"runs per candidate (default {DEFAULT_REPEAT}): verdicts that differ make it flaky, "
            "the rule of --expect --repeat; 1: no flake check",
        ),
    )
    max_envs: int | None = measured(
        None,
        flag=flag(
            "--max-envs",
            group=SEARCH,
            type=positive_int,
            metavar="N",
            help="at most N candidates (environments); with more workers than that allows, halves",
        ),
    )
    from_run: str | None = measured(
        None,
        flag=flag(
            "--from",
            group=SEARCH,
            metavar="RUN_ID",
            help="the stored run a case TARGET is taken from (default: the latest that has it)",
        ),
    )
    new_verdict: str | None = measured(
        None,
        flag=flag(
            "--new-verdict",
            group=SEARCH,
            metavar="STATUS",
            help="look for the first candidate with this verdict (e.g. fail_numeric): one with a third verdict "
            "(it crashes, it does not compile) is stepped over like a skip and named",
        ),
        check=check_new_verdict,
    )
    new_signature: str | None = measured(
        None,
        "the failure looked for",
        flag=flag(
            "--new-signature",
            group=SEARCH,
            metavar="TEXT",
            help="with a repro: the failure looked for is this signature (the last 'signature: TEXT' line the "
            "repro prints, else its traceback's exception key); a run that shows it is --fail-status, one that "
            "fails otherwise is a third verdict (bringup triage bisects each group this way)",
        ),
    )
    fail_status: str = measured(
        "fail_numeric",
        flag=flag(
            "--fail-status",
            group=SEARCH,
            choices=FAIL_STATUSES,
            help="a repro's failing exit is recorded as this status (default fail_numeric)",
        ),
    )
    target_device: str | None = measured(
        None,
        flag=flag(
            "--target-device",
            group=SEARCH,
            metavar="D",
            help="a stored case's device in the candidate envs (default: the stored run's)",
        ),
    )
    target_import: tuple[str, ...] | None = measured(
        None,
        flag=flag(
            "--target-import",
            group=SEARCH,
            action="append",
            metavar="MODULE",
            help="a stored case's --import modules in the candidate envs (default: the stored run's)",
        ),
    )
    env_cache: str | None = not_measured(
        None,
        "where environments are kept",
        flag=flag(
            "--env-cache",
            group=ENVS,
            metavar="DIR",
            help=f"where environments are kept (default ${ENV_CACHE_VAR}, else ~/.cache/bringup/envs)",
        ),
    )
    env_cache_max_gb: float = not_measured(
        DEFAULT_CACHE_MAX_GB,
        "the cache's size",
        flag=flag(
            "--env-cache-max-gb",
            group=ENVS,
            type=positive_float,
            metavar="GB",
            help=f"least recently used environments are removed past this (default {DEFAULT_CACHE_MAX_GB:g})",
        ),
    )
    inherit_site: bool = measured(
        False,
        "each environment sees this Python's packages too",
        flag=flag(
            "--inherit-site",
            group=ENVS,
            action="store_true",
            help="each environment also sees this Python's packages, under its own (bisect a plugin's "
            "builds on the torch installed here)",
        ),
    )
    build_budget: float = not_measured(
        DEFAULT_BUILD_BUDGET_S,
        "a kill limit on an environment's build",
        flag=flag(
            "--build-budget",
            group=ENVS,
            type=positive_float,
            metavar="SEC",
            help=f"wall-clock limit of one environment's build (default {DEFAULT_BUILD_BUDGET_S:g})",
        ),
    )
    run_budget: float = not_measured(
        DEFAULT_RUN_BUDGET_S,
        "a kill limit on one run of the target",
        flag=flag(
            "--run-budget",
            group=ENVS,
            type=positive_float,
            metavar="SEC",
            help=f"wall-clock limit of one run of the target (default {DEFAULT_RUN_BUDGET_S:g})",
        ),
    )
    compiler_bisect: str = measured(
        "auto",
        flag=flag(
            "--compiler-bisect",
            group=FOLLOWUP,
            choices=["auto", "on", "off"],
            help="PyTorch's compiler bisector (TORCH_BISECT_*) on the failing side of the change "
            "(auto: when the target compiles)",
        ),
    )
    localize: str = measured(
        "auto",
        flag=flag(
            "--localize",
            group=FOLLOWUP,
            choices=["auto", "on", "off"],
            help="bringup localize there (auto: when the target is a stored zoo case)",
        ),
    )
    followup_budget: float = not_measured(
        DEFAULT_FOLLOWUP_BUDGET_S,
        "a kill limit on each follow-up",
        flag=flag(
            "--followup-budget",
            group=FOLLOWUP,
            type=positive_float,
            metavar="SEC",
            help=f"wall-clock limit of each of those (default {DEFAULT_FOLLOWUP_BUDGET_S:g})",
        ),
    )
    # the global --json, also after the sub-command (not given there: the global one's value stays)
    json: str | None = not_measured(
        None, flag=flag("--json", metavar="FILE", default=argparse.SUPPRESS, help="write the answer as JSON")
    )

    def env_cache_dir(self) -> str:
        """--env-cache, else $BRINGUP_ENV_CACHE, else ~/.cache/bringup/envs: an absolute path."""
        return str(Path(self.env_cache or default_env_cache()).expanduser().absolute())

    def to_json(self, common: GlobalOptions) -> dict[str, Any]:
        """What the run stores (info["bisect"]["options"]): these options and the global ones it is driven with."""
        return {**self.as_dict(), **{k: getattr(common, k) for k in _LAUNCH}}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> tuple[BisectOptions, GlobalOptions]:
        """A stored bisection's options and the global ones it was driven with (a run stored before the options
        had one shape: its old keys read as their fields)."""
        values = {_OLD_KEYS.get(k, k): v for k, v in d.items()}
        launch = {k: values.pop(k) for k in _LAUNCH if k in values}
        values = {k: v for k, v in values.items() if k in cls.dests()}
        return cls.take(values), GlobalOptions(**launch)


OPTIONS = BisectOptions


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_options(p, BisectOptions)
