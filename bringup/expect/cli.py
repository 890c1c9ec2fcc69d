"""`bringup expect init [RUN] --out FILE`: a first expectations file from a stored run.
`bringup expect check [RUN] --expect FILE [--strict] [--update]`: classify a stored run (and its --repeat
runs) against a file, without running anything; exit code as `run --expect` would give; `--update` then
rewrites the file from that run (CI stored the run; the maintainer accepts it without re-running).
"""

from __future__ import annotations

import argparse
from typing import Any

from bringup.errors import BadInput


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="expect_cmd", metavar="ACTION", parser_class=type(p))
    i = sub.add_parser("init", help="write a first expectations file from a stored run")
    i.add_argument("run", nargs="?", default=None, help="run id (default: the latest run in the store)")
    i.add_argument("--from-run", dest="from_run", default=None, metavar="RUN_ID", help="same as the positional RUN")
    i.add_argument("--out", required=True, metavar="FILE", help="the file to write (refused if it exists)")
    i.add_argument("--force", action="store_true", help="overwrite FILE (its comments are lost)")
    c = sub.add_parser("check", help="classify a stored run against an expectations file (no device work)")
    c.add_argument("run", nargs="?", default=None, help="run id (default: the latest run in the store)")
    c.add_argument("--expect", dest="expect_file", required=True, metavar="FILE", help="the expectations file")
    c.add_argument("--strict", action="store_true", help="a new pass or a flaky case also makes the exit code 1")
    c.add_argument("--allow-unsupported", dest="allow_unsupported_", action="store_true",
                   help="'unsupported' cases don't count as failures")  # fmt: skip
    c.add_argument("--update", action="store_true",
                   help="then rewrite FILE from that run (as `--update-expect` would have; comments kept)")  # fmt: skip


def _repeats(st: Any, run_id: str) -> list[list[Any]]:
    reps = [r for r in st.runs() if r.info.get("repeat_of") == run_id]
    return [st.results(r.run_id) for r in sorted(reps, key=lambda r: int(r.info.get("repeat", 0)))]


def _pick(st: Any, args: argparse.Namespace) -> Any:
    rid = getattr(args, "from_run", None) or args.run
    if rid and getattr(args, "from_run", None) and args.run and args.run != args.from_run:
        raise BadInput("give the run once: RUN or --from-run RUN")
    if not rid:
        rid = st.latest_run_id()
        run = st.get_run(rid)
        if run.info.get("repeat_of"):  # the latest is a --repeat run: use the run it repeats
            rid = str(run.info["repeat_of"])
    return st.get_run(rid)


def main(sess: Any) -> int:
    from bringup.store import Store

    args = sess.args
    if args.expect_cmd is None:
        raise BadInput("expect: give an action: init or check")
    if not sess.db.exists():
        raise BadInput(f"no result database at {sess.db}")
    with Store(sess.db, create=False) as st:
        run = _pick(st, args)
        results = st.results(run.run_id)
        repeats = _repeats(st, run.run_id)
    if args.expect_cmd == "init":
        return _init(sess, args, run, results, repeats)
    return _check(sess, args, run, results, repeats)


def _init(sess: Any, args: argparse.Namespace, run: Any, results: list[Any], repeats: list[list[Any]]) -> int:
    from pathlib import Path

    from bringup.expect.file import ExpectFile
    from bringup.expect.update import apply
    from bringup.files import check_output_path

    out = Path(args.out)
    if out.exists() and not args.force:
        raise BadInput(f"--out {out} exists; to update it run with `--expect {out} --update-expect`, or add --force")
    check_output_path(str(out), "--out")
    f = ExpectFile.new(out)
    n = apply(f, results, repeats, run.device, run.torch_version, None)
    f.save()
    entries = f"{n['added']} entr{'y' if n['added'] == 1 else 'ies'}"
    sess.console.print(f"wrote {out}: {entries} from run {run.run_id} ({run.device}, torch {run.torch_version}, "
                       f"{len(results)} case(s))", highlight=False)  # fmt: skip
    return 0


def _check(sess: Any, args: argparse.Namespace, run: Any, results: list[Any], repeats: list[list[Any]]) -> int:
    from bringup.expect.classify import classify
    from bringup.expect.file import ExpectFile
    from bringup.expect.gate import print_judgement

    f = ExpectFile.load(args.expect_file)
    sel = f.select(run.device, run.torch_version)
    j = classify(results, repeats, f.expectations(sel), section=sel, path=str(f.path), strict=args.strict,
                 allow_unsupported=args.allow_unsupported_)  # fmt: skip
    print_judgement(j, sess.console)
    if not args.update:
        return j.exit_code()
    from bringup.expect.update import apply
    from bringup.files import check_output_path

    check_output_path(str(f.path), "--expect")
    n = apply(f, results, repeats, run.device, run.torch_version, sel)
    f.save()
    fresh = ExpectFile.load(f.path)
    sel2 = fresh.select(run.device, run.torch_version)
    after = classify(results, repeats, fresh.expectations(sel2), section=sel2, path=str(f.path), strict=args.strict,
                     allow_unsupported=args.allow_unsupported_)  # fmt: skip
    sess.console.print(f"--update: {f.path}: {n['added']} added, {n['changed']} changed, {n['removed']} removed; "
                       f"against it run {run.run_id} exits {after.exit_code()}", highlight=False)  # fmt: skip
    return after.exit_code()
