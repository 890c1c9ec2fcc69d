"""localize, registered as a capability: `bringup localize MODEL ...` plans one case (cli.build_cases),
runs it in a worker like every suite's (cli.run_case) and prints its table (cli.summarize). Not part of
`bringup run` (no run_cases): on a run, `--localize` (post_run.py, a post-run step) localizes the zoo's
numeric failures."""

from __future__ import annotations

from bringup.api import register_capability
from bringup.case import Case
from bringup.device import Device
from bringup.localize import args as face  # the torch-free face (cli)
from bringup.localize.args import LocalizeOptions
from bringup.localize.cli import build_cases, summarize
from bringup.options import Options


def _build_cases(options: Options, device: Device) -> list[Case]:
    return build_cases(options.of(LocalizeOptions))


register_capability(face, _build_cases, None, summarize)
