"""The bug block of every run, a post-run step (`bringup.api.PostRun`, registered below): once a run's cases (and
the steps that add work, such as --localize) are done, every case that did not pass gets its root-cause signature
and the cases are grouped by it (bringup/triage/groups.py). The block goes into the run's info (`bugs`: the
scorecard's Bugs section renders it, `report --history` reads it) and summary.json (`bugs`); the terminal gets one
line per group, the largest reach first. No device work: `bringup triage RUN` localizes, writes repros, bisects.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bringup.api import AfterRun, Finished, PostRun, Step, register_post_run
from bringup.case import CaseResult
from bringup.options import CommandOptions, Options

if TYPE_CHECKING:
    from rich.console import Console

    from bringup.device import Device

INFO_KEY = "bugs"
PRINTED = 5


def add_options(p: argparse.ArgumentParser, suppress: bool) -> None:
    """No options: every run gets its bug block."""
    return None


@dataclass(frozen=True)
class BugsOptions(CommandOptions):
    """The step has no options (every run gets its bug block)."""


def print_block(block: Mapping[str, Any], console: Console, limit: int = PRINTED) -> None:
    groups = block.get("groups") or []
    if not groups:
        return
    console.print(
        f"bugs: {len(groups)} group(s) behind {block.get('cases_signed', 0)} case(s) that did not pass "
        f"(largest reach first; repros and issues: bringup triage {block.get('run_id')})",
        highlight=False,
        markup=False,
    )
    for i, g in enumerate(groups[:limit], 1):
        r = g.get("reach") or {}
        dl = f", {r['downloads']:,} downloads" if r.get("downloads") else ""
        console.print(
            f"  {i}. {g['title']} [{r.get('cases', 0)} case(s), {r.get('models', 0)} model(s){dl}]",
            highlight=False,
            markup=False,
        )
    if len(groups) > limit:
        console.print(f"  ... {len(groups) - limit} more in summary.json (bugs)", highlight=False, markup=False)


def store_block(store: Any, run_id: str) -> dict[str, Any]:
    """Compute the run's bug block from the store and keep it in the run's info."""
    from bringup.triage.groups import block_of  # lazy: torch-free --help

    block, _ = block_of(store, run_id)
    store.update_run_info(run_id, **{INFO_KEY: block})
    return block


class BugsStep(Step):
    def finish(self, ctx: AfterRun, added: Sequence[CaseResult]) -> Finished:
        block = store_block(ctx.store, ctx.run.run_id)
        print_block(block, ctx.console)
        return Finished(extras={INFO_KEY: block})


def prepare_step(options: Options, device: Device) -> BugsStep:
    return BugsStep()


def section(block: Mapping[str, Any]) -> str:
    from bringup.triage.section import section_html  # lazy: torch-free --help

    return section_html(block)


# order 90: after the steps that add work (localize, 20), so its cases are in the store; finishing in reverse,
# it finishes before them (its block is ready for the gate's last word)
register_post_run(
    PostRun("bugs", add_options, prepare_step, order=90, info_key=INFO_KEY, section=section, options=BugsOptions)
)
