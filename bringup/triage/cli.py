"""`bringup triage [RUN] [--top N] [--bisect --between OLD NEW]`: from a run's failing cases to the bugs behind
them, one issue-ready Markdown file per group.

A short sequence of named steps:
1. localize: the run's wrong-numbers cases not localized yet, within `--budget`, into the run itself (as
   `--localize` would have: stored, resumable), so their signatures name the op (plan.localize_plan);
2. group: every case that did not pass, by signature, ranked by reach (groups.py); the block is stored back in the
   run's info, so its scorecard (`bringup report RUN`) and `report --history` show the refined groups;
3. minify: PyTorch's minifier for each compile group, a fullgraph repro for each graph break (work.py), as the
   cases of a run of their own (command `triage`, on the run's device, with its plugins);
4. repro: one per group, checked on the device and on cpu before it is attached (repro.py, verify.py);
5. bisect (`--bisect`): each checked repro through `bringup bisect`, asked for the group's own verdict and
   signature; PyTorch's compiler bisector on the first bad release for a repro that compiles;
6. issues: `NN-<id>.md` per group and a README index (issue.py), in `--out` (default: the run's folder/triage).

Exit codes: 0 every group got its issue and every repro made was confirmed; 1 a repro did not check out (its
issue says how); 2 bad input, nothing written.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import shutil
import sysconfig
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bringup.bisect.args import BisectOptions
from bringup.bisect.cli import drive
from bringup.errors import BadInput
from bringup.files import check_output_dir
from bringup.session import CommandSession
from bringup.store import Store
from bringup.triage.args import TriageOptions
from bringup.triage.args import add_arguments as add
from bringup.triage.post_run import INFO_KEY, print_block

OPTIONS = TriageOptions
SKIP_COMMANDS = ("bisect", "triage")


def add_arguments(p: Any) -> None:
    add(p)


def pick_run(store: Any, wanted: str | None) -> Any:
    """RUN, or the latest run that is not a bisection or a triage of its own."""
    if wanted:
        return store.get_run(wanted)
    runs = [r for r in store.runs() if r.command not in SKIP_COMMANDS]
    if not runs:
        raise BadInput(f"no run to triage in {store.path}")
    return runs[-1]


def main(sess: CommandSession) -> int:
    opts = sess.options.of(TriageOptions)  # checked where built (TriageOptions.check)
    with Store(sess.db, create=False) as store:  # a run to triage must exist: nothing is created otherwise
        run = pick_run(store, opts.run)
        out = Path(opts.out) if opts.out else sess.db.resolve().parent / run.run_id / "triage"
        check_output_dir(str(out), "--out")
        return Triage(sess, store, run, opts, out).go()


def carry_plugins(imports: tuple[str, ...], beside: Path) -> list[Path]:
    """The run's plugin modules that are importable here only through PYTHONPATH or the working directory (not
    installed), copied beside a repro: a bisection's candidate envs do not see PYTHONPATH (each env is its own),
    while a script's own folder is on its path. Installed plugins are seen with --inherit-site or installed per
    candidate (--with, --set)."""
    site = {Path(p).resolve() for p in (sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"])}
    out = []
    for name in dict.fromkeys(m.split(".")[0] for m in imports):
        spec = importlib.util.find_spec(name)
        origin = Path(spec.origin).resolve() if spec is not None and spec.origin else None
        if origin is None or any(origin.is_relative_to(s) for s in site) or name == "bringup":
            continue
        src = origin.parent if origin.name == "__init__.py" else origin
        dest = beside / src.name
        if src.is_dir():
            shutil.copytree(src, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, dest)
        out.append(dest)
    return out


class Triage:
    """One triage of one run (the steps of the module doc, in order)."""

    def __init__(self, sess: CommandSession, store: Any, run: Any, opts: TriageOptions, out: Path) -> None:
        self.sess, self.store, self.run, self.opts, self.out = sess, store, run, opts, out
        self.console = sess.console
        self.imports = tuple(run.info.get("imports") or ())
        self.t0 = time.monotonic()
        self.work_run: str | None = None

    def say(self, text: str) -> None:
        self.console.print(text, highlight=False, markup=False)

    def left(self) -> float:
        return self.opts.budget - (time.monotonic() - self.t0)

    def executor(self, run_dir: Path) -> Any:
        from bringup.runner import make_executor  # lazy: torch-free --help
        from bringup.runner.process import WorkerSpec, thread_env  # lazy: torch-free --help

        common = self.sess.options.common
        spec = WorkerSpec(
            device=self.run.device,
            imports=self.imports,
            log_dir=str(run_dir / "logs"),
            env=thread_env(common.workers or 1),
        )
        return make_executor(common.executor, spec, common.workers or 1, common.ray_address)

    # ---- 1. localize -------------------------------------------------------------------------------
    def localize(self) -> None:
        from bringup.runner import execute  # lazy: torch-free --help
        from bringup.triage.groups import localize_join  # lazy: fast --help
        from bringup.triage.plan import localize_plan  # lazy: torch-free --help

        results = self.store.results(self.run.run_id)
        rounds = localize_plan(results, localize_join(results), self.opts.localize_all)
        run_dir = self.sess.db.resolve().parent / self.run.run_id
        for n, cases in enumerate(rounds, 1):
            if self.left() <= 30:
                self.say(f"triage: budget spent; {sum(map(len, rounds[n - 1 :]))} localization(s) not run")
                return
            cases = [dataclasses.replace(c, budget_s=min(c.budget_s, self.left())) for c in cases]
            self.say(f"triage: localizing {len(cases)} wrong-numbers case(s) (round {n}) into run {self.run.run_id}")
            execute(self.store, self.run.run_id, cases, self.executor(run_dir), run_dir)

    # ---- 3. minify ---------------------------------------------------------------------------------
    def minify(self, groups: list[Any]) -> dict[str, Any]:
        from bringup.provenance import run_info  # lazy: fast --help
        from bringup.runner import execute  # lazy: torch-free --help
        from bringup.triage.plan import work_cases  # lazy: torch-free --help

        results = {r.case_id: r for r in self.store.results(self.run.run_id)}
        cases = work_cases(groups, results, self.run.device, max(60.0, self.left()))
        if not cases:
            return {}
        info = {"imports": list(self.imports), "triage_of": self.run.run_id, **run_info()}
        self.work_run = self.store.new_run("triage", self.sess.argv, self.run.device, self.run.device_name, info)
        run_dir = self.sess.db.resolve().parent / self.work_run
        self.say(f"triage: PyTorch's minifier / fullgraph on {len(cases)} group(s) (run {self.work_run})")
        execute(self.store, self.work_run, cases, self.executor(run_dir), run_dir)
        return {str(r.params.get("group")): r for r in self.store.results(self.work_run)}

    # ---- 4. repros ---------------------------------------------------------------------------------
    def repros(self, groups: list[Any], work: dict[str, Any]) -> dict[str, Any]:
        from bringup.triage import repro  # lazy: torch-free --help
        from bringup.triage.groups import localize_join  # lazy: fast --help

        results = self.store.results(self.run.run_id)
        ctx = repro.Context(
            self.run.device,
            self.imports,
            {r.case_id: r for r in results},
            localize_join(results),
            work,
            self.opts.check_budget,
        )
        self.say(f"triage: writing and checking {len(groups)} repro(s) on {self.run.device} and on cpu")
        workers = max(1, int(self.sess.options.common.workers or 1))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            made = pool.map(
                lambda ig: repro.make(ig[1], self.out / f"{ig[0]:02d}-{ig[1].signature.id}", ctx), enumerate(groups, 1)
            )
            return {g.signature.id: r for g, r in zip(groups, made, strict=True)}

    # ---- 5. bisect ---------------------------------------------------------------------------------
    def bisect(self, g: Any, rep: Any, gdir: Path) -> dict[str, Any] | None:
        from bringup.bisect.prepare import build_spec  # lazy: fast --help
        from bringup.triage.plan import fail_status  # lazy: torch-free --help
        from bringup.triage.repro import expected_signature  # lazy: torch-free --help

        if rep is None or rep.check is None or not rep.check.ok or rep.attach:
            return None
        # PyTorch's compiler bisector splits inductor (its passes, lowerings) and the aot stages before it: on a
        # repro that goes through inductor; a plugin's backend is its own compiler, which it cannot split
        cb = self.opts.compiler_bisect
        cb = ("on" if rep.backend == "inductor" else "off") if cb == "auto" else cb
        bopts = BisectOptions(
            target=str(rep.bisect_target or rep.script),
            between=tuple(self.opts.between) if self.opts.between else None,
            wheels=self.opts.wheels,
            sets=tuple(self.opts.sets),
            repeat=self.opts.bisect_repeat,
            new_verdict=fail_status(g.signature.kind),
            new_signature=expected_signature(g),
            fail_status=fail_status(g.signature.kind),
            inherit_site=self.opts.inherit_site,
            env_cache=self.opts.env_cache,
            compiler_bisect=cb,
            localize="off",
            json=str(gdir / "bisect.json"),
        ).checked()
        carry_plugins(self.imports, Path(bopts.target or "").parent)
        self.say(f"triage: bisecting group {g.signature.id} ({g.signature.title[:80]})")
        drive(self.sess, bopts, self.sess.options.common, build_spec(bopts, self.sess.db))
        try:
            return dict(json.loads((gdir / "bisect.json").read_text()))
        except (OSError, ValueError):
            return None

    # ---- the steps ---------------------------------------------------------------------------------
    def go(self) -> int:
        from bringup.triage import issue  # lazy: torch-free --help
        from bringup.triage.groups import block_of  # lazy: fast --help

        self.say(f"triage {self.run.run_id} ({self.run.command} on {self.run.device}): results in {self.out}")
        if not self.opts.no_repro:
            self.localize()
        block, groups = block_of(self.store, self.run.run_id)
        chosen = groups[: self.opts.top] if self.opts.top else groups
        work = {} if self.opts.no_repro else self.minify(chosen)
        reps = {} if self.opts.no_repro else self.repros(chosen, work)
        self.out.mkdir(parents=True, exist_ok=True)
        env = issue.environment()
        written, failed = [], 0
        for rank, g in enumerate(chosen, 1):
            gdir = self.out / f"{rank:02d}-{g.signature.id}"
            rep = reps.get(g.signature.id)
            bis = self.bisect(g, rep, gdir) if self.opts.bisect else None
            fname = f"{rank:02d}-{g.signature.id}.md"
            (self.out / fname).write_text(issue.render(g, rank, block, self.run, rep, env, bis))
            failed += rep is not None and rep.script is not None and not (rep.check and rep.check.ok)
            g.extra.update({"issue": fname, "repro": rep.to_json() if rep else None})
            if bis:
                g.extra["bisect"] = {k: bis.get(k) for k in ("run_id", "result", "message", "followups")}
            written.append((rank, g, fname, rep))
        (self.out / "README.md").write_text(issue.index(written, self.run))
        self.store_back(block, chosen)
        print_block(self.store.get_run(self.run.run_id).info.get(INFO_KEY) or block, self.console, limit=len(chosen))
        for _, _, fname, rep in written:
            self.say(f"  {fname}: {rep.to_json()['verdict'] if rep else 'no repro made'}")
        self.say(f"triage: {len(written)} issue(s) in {self.out} ({time.monotonic() - self.t0:.0f} s)")
        return 1 if failed else 0

    def store_back(self, block: dict[str, Any], chosen: list[Any]) -> None:
        """The refined block (and each group's repro verdict, issue, bisection) back in the run's info; the
        triage run (if any) finished with the same."""
        extra = {g.signature.id: g.extra for g in chosen}
        for gj in block["groups"]:
            gj.update(extra.get(gj["id"], {}))
        block["triage"] = {"at": time.time(), "out": str(self.out), "work_run": self.work_run}
        self.store.update_run_info(self.run.run_id, **{INFO_KEY: block})
        if self.work_run is not None:
            self.store.update_run_info(self.work_run, triage={"of": self.run.run_id, "groups": len(chosen)})
            self.store.end_run(self.work_run, "finished")
        (self.out / "triage.json").write_text(json.dumps(block, indent=1, default=str) + "\n")
