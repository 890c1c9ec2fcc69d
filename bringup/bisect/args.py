"""bisect's command-line face: `bringup bisect TARGET ...` is a tool (a command that plans its cases round by
round itself), listed here torch-free so that `bringup --help` offers it (bringup.api.tools), with its options
and `BisectOptions`, the typed options built once from the parsed command line (nothing below this face
reads the parser's namespace).
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from bringup.api import Tool
from bringup.options import CommandOptions, GlobalOptions, measured, not_measured

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


def add_arguments(p: argparse.ArgumentParser) -> None:
    from bringup.options import positive_float, positive_int

    p.add_argument(
        "target",
        nargs="?",
        default=None,
        metavar="TARGET",
        help="a repro script (exit 0: good, 1: the bug is there, 125: cannot test this version), or "
        "a case of a stored run: its case id or suite/name (--from RUN_ID; default the latest run "
        "that has it)",
    )
    c = p.add_argument_group("candidates (one of)")
    c.add_argument(
        "--between",
        nargs=2,
        metavar=("OLD", "NEW"),
        default=None,
        help="the releases the index lists from OLD to NEW, e.g. torch==2.9.0 torch==2.13.0 (a bare "
        "name as NEW: the newest listed); with --wheels: the range of the directory's builds",
    )
    c.add_argument(
        "--wheels",
        metavar="DIR",
        default=None,
        help="a directory of wheels of one package (a plugin's builds), in version order",
    )
    c.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="REQS",
        help="an explicit requirement set, e.g. 'torch==2.9.0 torchvision==0.24.0' (packages that "
        "move together); repeat it, in order",
    )
    c.add_argument(
        "--sets",
        dest="sets_file",
        metavar="FILE",
        default=None,
        help="requirement sets from FILE, one per line, in order (# comments)",
    )
    c.add_argument(
        "--with",
        dest="with_reqs",
        action="append",
        default=[],
        metavar="REQ",
        help="a requirement installed beside every candidate (e.g. 'numpy<2'); repeatable",
    )
    c.add_argument("--pre", action="store_true", help="index releases: include pre-releases")
    s = p.add_argument_group("search")
    s.add_argument(
        "--all",
        dest="every",
        action="store_true",
        help="run every candidate (no bisection): each verdict and every change",
    )
    s.add_argument(
        "--repeat",
        type=positive_int,
        default=DEFAULT_REPEAT,
        metavar="N",
        help=f"runs per candidate (default {DEFAULT_REPEAT}): verdicts that differ make it flaky, "
        "the rule of --expect --repeat; 1: no flake check",
    )
    s.add_argument(
        "--max-envs",
        type=positive_int,
        default=None,
        metavar="N",
        help="at most N candidates (environments); with more workers than that allows, halves",
    )
    s.add_argument(
        "--from",
        dest="from_run",
        metavar="RUN_ID",
        default=None,
        help="the stored run a case TARGET is taken from (default: the latest that has it)",
    )
    s.add_argument(
        "--new-verdict",
        default=None,
        metavar="STATUS",
        help="look for the first candidate with this verdict (e.g. fail_numeric): one with a third verdict "
        "(it crashes, it does not compile) is stepped over like a skip and named",
    )
    s.add_argument(
        "--new-signature",
        default=None,
        metavar="TEXT",
        help="with a repro: the failure looked for is this signature (the last 'signature: TEXT' line the repro "
        "prints, else its traceback's exception key); a run that shows it is --fail-status, one that fails "
        "otherwise is a third verdict (bringup triage bisects each group this way)",
    )
    s.add_argument(
        "--fail-status",
        choices=FAIL_STATUSES,
        default="fail_numeric",
        help="a repro's failing exit is recorded as this status (default fail_numeric)",
    )
    s.add_argument(
        "--target-device",
        default=None,
        metavar="D",
        help="a stored case's device in the candidate envs (default: the stored run's)",
    )
    s.add_argument(
        "--target-import",
        action="append",
        default=None,
        metavar="MODULE",
        help="a stored case's --import modules in the candidate envs (default: the stored run's)",
    )
    e = p.add_argument_group("environments")
    e.add_argument(
        "--env-cache",
        metavar="DIR",
        default=None,
        help=f"where environments are kept (default ${ENV_CACHE_VAR}, else ~/.cache/bringup/envs)",
    )
    e.add_argument(
        "--env-cache-max-gb",
        type=positive_float,
        default=DEFAULT_CACHE_MAX_GB,
        metavar="GB",
        help=f"least recently used environments are removed past this (default {DEFAULT_CACHE_MAX_GB:g})",
    )
    e.add_argument(
        "--inherit-site",
        action="store_true",
        help="each environment also sees this Python's packages, under its own (bisect a plugin's "
        "builds on the torch installed here)",
    )
    e.add_argument(
        "--build-budget",
        type=positive_float,
        default=DEFAULT_BUILD_BUDGET_S,
        metavar="SEC",
        help=f"wall-clock limit of one environment's build (default {DEFAULT_BUILD_BUDGET_S:g})",
    )
    e.add_argument(
        "--run-budget",
        type=positive_float,
        default=DEFAULT_RUN_BUDGET_S,
        metavar="SEC",
        help=f"wall-clock limit of one run of the target (default {DEFAULT_RUN_BUDGET_S:g})",
    )
    f = p.add_argument_group("on the first changed candidate")
    f.add_argument(
        "--compiler-bisect",
        choices=["auto", "on", "off"],
        default="auto",
        help="PyTorch's compiler bisector (TORCH_BISECT_*) on the failing side of the change "
        "(auto: when the target compiles)",
    )
    f.add_argument(
        "--localize",
        choices=["auto", "on", "off"],
        default="auto",
        help="bringup localize there (auto: when the target is a stored zoo case)",
    )
    f.add_argument(
        "--followup-budget",
        type=positive_float,
        default=DEFAULT_FOLLOWUP_BUDGET_S,
        metavar="SEC",
        help=f"wall-clock limit of each of those (default {DEFAULT_FOLLOWUP_BUDGET_S:g})",
    )
    p.add_argument("--json", metavar="FILE", default=argparse.SUPPRESS, help="write the answer as JSON")


@dataclass(frozen=True)
class BisectArgs(CommandOptions):
    """`bringup bisect`'s options as the parser gives them (add_arguments' dests; bringup/cli.py builds them);
    BisectOptions.from_args resolves them (the env cache's path, the run's --workers / --executor)."""

    target: str | None = measured(None)
    between: tuple[str, ...] | None = measured(None)
    wheels: str | None = measured(None)
    sets: tuple[str, ...] = measured(())
    sets_file: str | None = measured(None)
    with_reqs: tuple[str, ...] = measured(())
    pre: bool = measured(False)
    every: bool = measured(False)
    repeat: int = measured(DEFAULT_REPEAT, "runs per candidate: a flake is judged on them")
    max_envs: int | None = measured(None)
    from_run: str | None = measured(None)
    new_verdict: str | None = measured(None)
    fail_status: str = measured("fail_numeric")
    target_device: str | None = measured(None)
    target_import: tuple[str, ...] | None = measured(None)
    env_cache: str | None = not_measured(None, "where environments are kept")
    env_cache_max_gb: float = not_measured(DEFAULT_CACHE_MAX_GB, "the cache's size")
    inherit_site: bool = measured(False, "each environment sees this Python's packages too")
    build_budget: float = not_measured(DEFAULT_BUILD_BUDGET_S, "a kill limit on an environment's build")
    run_budget: float = not_measured(DEFAULT_RUN_BUDGET_S, "a kill limit on one run of the target")
    compiler_bisect: str = measured("auto")
    localize: str = measured("auto")
    followup_budget: float = not_measured(DEFAULT_FOLLOWUP_BUDGET_S, "a kill limit on each follow-up")
    json: str | None = not_measured(None)
    new_signature: str | None = measured(None, "the failure looked for")


OPTIONS = BisectArgs


@dataclass(frozen=True)
class BisectOptions:
    """`bringup bisect`'s options, resolved once from the command line's (`from_args`); stored with the run."""

    target: str | None
    between: tuple[str, str] | None
    wheels: str | None
    sets: tuple[str, ...]
    sets_file: str | None
    with_reqs: tuple[str, ...]
    pre: bool
    every: bool
    repeat: int
    max_envs: int | None
    new_verdict: str | None
    from_run: str | None
    fail_status: str
    target_device: str | None
    target_imports: tuple[str, ...] | None
    env_cache: str
    env_cache_max_gb: float
    inherit_site: bool
    build_budget_s: float
    run_budget_s: float
    compiler_bisect: str
    localize: str
    followup_budget_s: float
    json: str | None
    workers: int
    executor: str
    ray_address: str | None
    new_signature: str | None = None

    @classmethod
    def from_args(cls, args: BisectArgs, common: GlobalOptions | None = None) -> BisectOptions:
        common = common or GlobalOptions()
        between = tuple(args.between) if args.between else None
        imports = tuple(args.target_import) if args.target_import else None
        return cls(
            target=args.target,
            between=between,  # type: ignore[arg-type]  # --between takes exactly two (nargs=2)
            wheels=args.wheels,
            sets=tuple(args.sets),
            sets_file=args.sets_file,
            with_reqs=tuple(args.with_reqs),
            pre=bool(args.pre),
            every=bool(args.every),
            repeat=int(args.repeat),
            max_envs=args.max_envs,
            new_verdict=args.new_verdict,
            from_run=args.from_run,
            fail_status=args.fail_status,
            target_device=args.target_device,
            target_imports=imports,
            env_cache=str(Path(args.env_cache or default_env_cache()).expanduser().absolute()),
            env_cache_max_gb=float(args.env_cache_max_gb),
            inherit_site=bool(args.inherit_site),
            build_budget_s=float(args.build_budget),
            run_budget_s=float(args.run_budget),
            compiler_bisect=args.compiler_bisect,
            localize=args.localize,
            followup_budget_s=float(args.followup_budget),
            json=args.json,
            workers=int(common.workers or 1),
            executor=common.executor or "local",
            ray_address=common.ray_address,
            new_signature=args.new_signature or None,
        )

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> BisectOptions:
        kw = {f.name: d.get(f.name) for f in fields(cls)}
        for name in ("sets", "with_reqs"):
            kw[name] = tuple(kw[name] or ())
        kw["between"] = tuple(kw["between"]) if kw["between"] else None
        kw["target_imports"] = tuple(kw["target_imports"]) if kw["target_imports"] is not None else None
        return cls(**kw)  # type: ignore[arg-type]  # a stored run's options, as to_json wrote them
