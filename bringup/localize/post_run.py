"""`--localize` on a run (zoo, or `run` with zoo in it), a post-run step (`bringup.api.PostRun`, registered
below): after the run, every zoo case that ended `fail_numeric` is localized, in the same run (its
localize cases are added to it and stored like any other). A failure of the eager run is localized
eagerly (module, then op); one where eager matched and the compiled path did not ("compiled: ..."
reasons) by regional bisection with the case's backend.
Mixed precision (amp-*) cases are not localized (the module-by-module rule needs one run dtype).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bringup.api import AfterRun, Finished, PostRun, Step, register_post_run
from bringup.case import Case, CaseResult, Status
from bringup.options import TORCH_DTYPE_NAMES, CommandOptions, Options, not_measured

if TYPE_CHECKING:
    from rich.console import Console

    from bringup.device import Device

_DTYPES = TORCH_DTYPE_NAMES  # zoo's precision name -> localize's case dtype (pure precisions only)


def add_options(p: argparse.ArgumentParser, suppress: bool) -> None:
    d = argparse.SUPPRESS if suppress else None
    p.add_argument(
        "--localize",
        action="store_true",
        default=d if suppress else False,
        help="localize every zoo fail_numeric: first module and aten op off (bringup localize)",
    )


@dataclass(frozen=True)
class LocalizeStepOptions(CommandOptions):
    """--localize (add_options' dest), `Options.parts["localize"]`."""

    localize: bool = not_measured(False, "cases added after the run's, on their own line: the run's are the same")


def _asked(options: Options) -> bool:
    opts = options.part("localize", LocalizeStepOptions)
    return opts is not None and bool(opts.localize)


def cases_for(results: Sequence[CaseResult]) -> tuple[list[Case], list[str]]:
    """(localize cases for the zoo's fail_numeric results, notes on those left out)."""
    out: list[Case] = []
    notes: list[str] = []
    for r in results:
        if r.suite != "zoo" or r.status is not Status.FAIL_NUMERIC:
            continue
        p = r.params
        dtype = _DTYPES.get(str(p.get("dtype", "")))
        if dtype is None or p.get("source") not in ("hf", "timm", "fn"):
            notes.append(f"zoo/{r.name}: not localized ({p.get('source')}, {p.get('dtype')})")
            continue
        compiled = r.reason.startswith("compiled") and str(p.get("backend") or "none") not in ("none", "eager")
        backend = str(p["backend"]) if compiled else ""
        params = {
            "source": p["source"],
            "model": p["model"],
            "task": p.get("task") or "",
            "dtype": dtype,
            "seed": int(p.get("seed", 0)),
            "backend": backend,
        }
        name = f"{r.name} {dtype}" + (f" {backend}" if backend else "")
        out.append(Case("localize", name, params, "bringup.localize.cli:run_case", 600.0))
    return out, notes


def run_localize(
    options: Options,
    store: Any,
    run_id: str,
    results: Sequence[CaseResult],
    new_executor: Callable[[], Any],
    run_dir: Path,
    console: Console,
) -> list[CaseResult]:
    """With --localize: run the localize cases into `run_id`; returns their results ([] without)."""
    if not _asked(options):
        return []
    from bringup.runner import execute  # lazy: torch-free --help

    cases, notes = cases_for(results)
    for n in notes:
        console.print(n, highlight=False, markup=False)
    if not cases:
        console.print("--localize: no zoo fail_numeric to localize", highlight=False)
        return []
    console.print(f"--localize: {len(cases)} case(s)", highlight=False)
    execute(store, run_id, cases, new_executor(), run_dir)
    ids = {c.case_id for c in cases}
    return [r for r in store.results(run_id) if r.case_id in ids]


class LocalizeStep(Step):
    """--localize in a run: its cases run after the run's own (added to the run); their table after the
    suites' summaries."""

    def run(self, ctx: AfterRun) -> list[CaseResult]:
        return run_localize(
            ctx.options, ctx.store, ctx.run.run_id, ctx.results, ctx.new_executor, ctx.run_dir, ctx.console
        )

    def finish(self, ctx: AfterRun, added: Sequence[CaseResult]) -> Finished:
        if not added:
            return Finished()
        from bringup.localize.cli import summarize  # lazy: torch-free --help

        return Finished(summarize(list(added), ctx.console))


def prepare_step(options: Options, device: Device) -> LocalizeStep | None:
    return LocalizeStep() if _asked(options) else None


register_post_run(PostRun("localize", add_options, prepare_step, order=20, options=LocalizeStepOptions))
