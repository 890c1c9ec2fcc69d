"""port's option on `bringup run` (bringup.api.RunOptions): `--port PATH` scans PATH for CUDA-only code
(static analysis in this process, no device) before the run; the findings go into the run's info as
`info["port"]`, into summary.json as `port`, and into the report's port section (section.py).
torch-free: the parser imports this module."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bringup.api import RunOptions, RunPart, register_run_options
from bringup.case import Case
from bringup.errors import BadInput
from bringup.options import CommandOptions, Options, not_measured

if TYPE_CHECKING:
    from rich.console import Console

    from bringup.device import Device


@dataclass(frozen=True)
class PortRunOptions(CommandOptions):
    """add_arguments' dest, `Options.parts["port"]` on `bringup run`."""

    port: tuple[str, ...] = not_measured((), "a static scan of the user's code stored beside the run: no case changes")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--port",
        metavar="PATH",
        action="append",
        default=[],
        help="also scan PATH for CUDA-only code (bringup port) and put findings in the report (repeatable)",
    )


def check_paths(paths: list[str]) -> None:
    """A missing path is BadInput (raised before any work, even with port left out by --skip)."""
    for path in paths:
        if not Path(path).exists():
            raise BadInput(f"--port {path}: no such file or directory")


def scan_paths(paths: list[str]) -> dict[str, Any]:
    """`bringup port PATH...` without --fix: {"findings": [...], "summary": {...}}."""
    check_paths(paths)
    from bringup.port import scan  # lazy: torch-free --help

    return dict(scan(list(paths)).to_json())


def _summarize(port: dict[str, Any]) -> Any:
    def show(console: Console) -> None:
        s = port.get("summary", {})
        console.print(
            f"port: {s.get('findings', 0)} finding(s) in {s.get('files', 0)} file(s), "
            f"{s.get('fixable', 0)} fixable (bringup port --fix)",
            highlight=False,
        )

    return show


def apply(options: Options, device: Device, cases: list[Case], picked: bool) -> RunPart | None:
    opts = options.part("port", PortRunOptions) or PortRunOptions()
    paths = list(opts.port)
    check_paths(paths)
    if not paths or not picked:
        return None
    port = scan_paths(paths)
    return RunPart(cases, {"port": port}, _summarize(port))


register_run_options(RunOptions("port", add_arguments, apply, options=PortRunOptions))
