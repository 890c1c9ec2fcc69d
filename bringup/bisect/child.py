"""Inside a candidate's environment: re-run one stored case with that env's torch and bringup.

    python -m bringup.bisect.child --case case.json --out result.json --device cpu [--import M] [--budget SEC]

The case runs in a worker process exactly as in any run (bringup.runner: its budget, a crash or a hang a
status); its CaseResult is written as JSON. Exit 0 when it passed, 1 otherwise: so this command is also
what PyTorch's compiler bisector runs on the changed version.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from bringup.case import Case, CaseResult


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bringup.bisect.child")
    p.add_argument("--case", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--device", default="cpu")
    p.add_argument("--import", dest="imports", action="append", default=[])
    p.add_argument("--budget", type=float, default=None)
    a = p.parse_args(argv)
    from bringup.runner import make_executor  # lazy: bisect/envs.py's env check imports this module torch-free
    from bringup.runner.process import WorkerSpec  # lazy: bisect/envs.py's env check imports this module torch-free

    case = Case.from_json(json.loads(Path(a.case).read_text()))
    if a.budget:
        case = replace(case, budget_s=float(a.budget))
    run_dir = Path(tempfile.mkdtemp(prefix="bringup-bisect-child-", dir=Path(a.out).parent))
    spec = WorkerSpec(device=a.device, imports=tuple(a.imports), log_dir=str(run_dir / "logs"))
    executor = make_executor("local", spec, 1)
    got: list[CaseResult] = []
    try:
        executor.run([case], run_dir, got.append)
    finally:
        executor.shutdown()
    if not got:
        print("bringup.bisect.child: the case gave no result", file=sys.stderr)
        return 2
    r = got[0]
    Path(a.out).write_text(json.dumps(r.to_json(), default=str))
    print(f"{r.suite}/{r.name}: {r.status.value} {r.reason}".rstrip())
    return 0 if r.status.value == "pass" else 1


if __name__ == "__main__":
    sys.exit(main())
