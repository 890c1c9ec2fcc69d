"""`bringup expect init [RUN] --out FILE`: a first expectations file from a stored run.
`bringup expect check [RUN] --expect FILE [--strict] [--update]`: classify a stored run (and its --repeat
runs) against a file, without running anything; exit code as `run --expect` would give; `--update` then
rewrites the file from that run (CI stored the run; the maintainer accepts it without re-running).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bringup.errors import BadInput
from bringup.expect.file import ExpectFile
from bringup.expect.gate import Gate, print_judgement
from bringup.files import atomic_write_text, check_output_path
from bringup.options import CommandOptions, add_dtype, measured, not_measured
from bringup.session import CommandSession
from bringup.store import Store


@dataclass(frozen=True)
class ExpectOptions(CommandOptions):
    """`bringup expect`'s options: every action's dests (add_arguments'); `import`'s FILE.csv is the dest
    `csv`, Options.common.csv."""

    expect_cmd: str | None = measured(None)
    run: str | None = measured(None)
    from_run: str | None = measured(None)
    out: str | None = not_measured(None)
    force: bool = not_measured(False)
    expect_file: str | None = measured(None)
    strict: bool = not_measured(False, "the exit code only")
    allow_unsupported_: bool = not_measured(False, "the exit code only")
    update: bool = not_measured(False, "the file rewritten from the run")
    xpu_device: str = measured("*")
    xpu_torch: str = measured("*")
    dtype: str = measured("fp32")
    xpu_suite: str = measured("zoo")


OPTIONS = ExpectOptions


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
    c.add_argument(
        "--allow-unsupported",
        dest="allow_unsupported_",
        action="store_true",
        help="'unsupported' cases don't count as failures",
    )
    c.add_argument(
        "--update",
        action="store_true",
        help="then rewrite FILE from that run (as `--update-expect` would have; comments kept)",
    )
    for name, what in (
        ("import", "read a torch-xpu-ops expected-accuracy CSV into an expectations file"),
        ("export", "write a section as a torch-xpu-ops expected-accuracy CSV"),
    ):
        x = sub.add_parser(name, help=what)
        if name == "import":
            x.add_argument("csv", metavar="FILE.csv", help="the CSV (name,float32,bfloat16,float16,amp_bf16,amp_fp16)")
            x.add_argument(
                "--out",
                required=True,
                metavar="FILE",
                help="the expectations file to write (an existing one gets the section added)",
            )
        else:
            x.add_argument("--expect", dest="expect_file", required=True, metavar="FILE", help="the expectations file")
            x.add_argument("--out", required=True, metavar="FILE.csv", help="the CSV to write")
        x.add_argument("--device", dest="xpu_device", default="*", help="the section's device type (default *)")
        x.add_argument("--torch", dest="xpu_torch", default="*", help="the section's torch version (default *)")
        add_dtype(x, "fp32", default_note="fp32: the CSV column of that precision")
        x.add_argument("--suite", dest="xpu_suite", default="zoo", help="the suite of the cases (default zoo)")


def _repeats(st: Any, run_id: str) -> list[list[Any]]:
    reps = [r for r in st.runs() if r.info.get("repeat_of") == run_id]
    return [st.results(r.run_id) for r in sorted(reps, key=lambda r: int(r.info.get("repeat", 0)))]


def _pick(st: Any, args: ExpectOptions) -> Any:
    rid = args.from_run or args.run
    if rid and args.from_run and args.run and args.run != args.from_run:
        raise BadInput("give the run once: RUN or --from-run RUN")
    if not rid:
        rid = st.latest_run_id()
        run = st.get_run(rid)
        if run.info.get("repeat_of"):  # the latest is a --repeat run: use the run it repeats
            rid = str(run.info["repeat_of"])
    return st.get_run(rid)


def main(sess: CommandSession) -> int:
    args = sess.options.of(ExpectOptions)
    if args.expect_cmd is None:
        raise BadInput("expect: give an action: init, check, import or export")
    if args.expect_cmd in ("import", "export"):
        return _xpu(sess, args)
    if not sess.db.exists():
        raise BadInput(f"no result database at {sess.db}")
    with Store(sess.db, create=False) as st:
        run = _pick(st, args)
        results = st.results(run.run_id)
        repeats = _repeats(st, run.run_id)
    if args.expect_cmd == "init":
        return _init(sess, args, run, results, repeats)
    return _check(sess, args, run, results, repeats)


def _init(sess: CommandSession, args: ExpectOptions, run: Any, results: list[Any], repeats: list[list[Any]]) -> int:
    from bringup.expect.update import apply  # lazy: fast --help

    assert args.out is not None  # required by the `init` parser
    out = Path(args.out)
    if out.exists() and not args.force:
        raise BadInput(f"--out {out} exists; to update it run with `--expect {out} --update-expect`, or add --force")
    check_output_path(str(out), "--out")
    f = ExpectFile.new(out)
    n = apply(f, results, repeats, run.device, run.torch_version, None)
    f.save()
    entries = f"{n['added']} entr{'y' if n['added'] == 1 else 'ies'}"
    sess.console.print(
        f"wrote {out}: {entries} from run {run.run_id} ({run.device}, torch {run.torch_version}, "
        f"{len(results)} case(s))",
        highlight=False,
    )
    return 0


def _check(sess: CommandSession, args: ExpectOptions, run: Any, results: list[Any], repeats: list[list[Any]]) -> int:
    assert args.expect_file is not None  # required by the `check` parser
    f = ExpectFile.load(args.expect_file)
    gate = Gate.of(f, run.device, run.torch_version, bool(args.strict), bool(args.update), 1, args.allow_unsupported_)
    j = gate.judge(results, repeats)
    print_judgement(j, sess.console)
    if not args.update:
        return j.exit_code()

    check_output_path(str(f.path), "--expect")
    n, fresh = gate.write_file(results, repeats)
    after = fresh.judge(results, repeats)
    sess.console.print(
        f"--update: {f.path}: {n['added']} added, {n['changed']} changed, {n['removed']} removed; "
        f"against it run {run.run_id} exits {after.exit_code()}",
        highlight=False,
    )
    return after.exit_code()


def _xpu(sess: CommandSession, args: ExpectOptions) -> int:
    """`expect import FILE.csv --out FILE` / `expect export --expect FILE --out FILE.csv` (expect/xpu_csv.py)."""
    csv_path = str(sess.options.common.csv)  # import's FILE.csv: the dest `csv`, beside the global --csv

    from ruamel.yaml.comments import CommentedMap  # lazy: fast --help

    from bringup.expect import xpu_csv  # lazy: fast --help

    xpu_csv.column_of(args.dtype)  # a bad --dtype: exit 2 before anything is read
    assert args.out is not None  # required by the `import` and `export` parsers
    check_output_path(args.out, "--out")
    if args.expect_cmd == "import":
        if not Path(csv_path).is_file():
            raise BadInput(f"{csv_path}: no such file")
        out = Path(args.out)
        f = ExpectFile.load(out) if out.exists() else ExpectFile.new(out)
        devices = f.doc.setdefault("devices", CommentedMap())
        if devices.get(args.xpu_device) is None:
            devices[args.xpu_device] = CommentedMap()
        if devices[args.xpu_device].get(args.xpu_torch) is None:
            devices[args.xpu_device][args.xpu_torch] = CommentedMap()
        n = xpu_csv.import_csv(csv_path, devices[args.xpu_device][args.xpu_torch], args.dtype, args.xpu_suite)
        f.validate()  # what it writes, it reads back
        f.save()
        sess.console.print(
            f"imported {n['rows']} row(s) of {csv_path} (column {n['column']}) into {out} "
            f"({args.xpu_device}/torch {args.xpu_torch})",
            highlight=False,
            markup=False,
        )
        for u in n["unknown"]:
            sess.console.print(
                f"  cannot map {u}: no bringup status; expected as crash (the note keeps it)",
                highlight=False,
                markup=False,
            )
        return 0
    assert args.expect_file is not None  # required by the `export` parser
    f = ExpectFile.load(args.expect_file)
    sel = f.select(args.xpu_device, args.xpu_torch) if args.xpu_device != "*" else ("*", args.xpu_torch)
    node = f._section_node(sel) if sel is not None else None
    if node is None or sel is None:
        raise BadInput(f"--expect {f.path}: no section for device {args.xpu_device}, torch {args.xpu_torch}")
    text, lossy = xpu_csv.export_csv(node, args.dtype, args.xpu_suite)
    atomic_write_text(args.out, text)
    sess.console.print(f"exported {f.path} ({sel[0]}/torch {sel[1]}) to {args.out}", highlight=False, markup=False)
    for what in lossy:
        sess.console.print(f"  cannot map {what} (a '# bringup:' comment row says so)", highlight=False, markup=False)
    return 0
