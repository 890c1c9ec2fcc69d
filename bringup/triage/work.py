"""triage's device work, run as cases by the runner (a fresh worker each: `isolated`, budget, crash isolation):
PyTorch's own minifier on a compile failure, and a graph break's fullgraph repro.

Minifier (`run_minify`): the group's case is compiled again, as the zoo compiled it (same model, weights, batch,
precision, backend), with dynamo's repro machinery on (`torch._dynamo.config.repro_after`: "aot" for inductor,
whose compile_fx it wraps, else "dynamo", which wraps any backend; `repro_level` 2): the failing graph is dumped
as `minifier_launcher.py`, which is then run (with the device's plugins imported) to minify it; what it writes,
`repro.py`, is the minified graph with its inputs. Nothing of the minifier is re-implemented here: the script is
kept as PyTorch wrote it, with this machine's paths taken out and the plugins' imports put in front
(bringup/triage/compile_repro.py).

Graph break (`run_break`): dynamo captured no graph: the model is compiled with `fullgraph=True`, which raises at
the break, and a standalone script that builds the same model (transformers, from the tiny config; or the user's
`module:function`) and compiles it that way is written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from bringup.case import Case, CaseResult, Status
from bringup.checks.failure_text import exception_key, exception_parts
from bringup.triage.compile_repro import break_script, clean_minified
from bringup.triage.verify import child_env
from bringup.zoo.run import build_model
from bringup.zoo.spec import ZooSpec
from bringup.zoo.steps import RunHow, train_run

if TYPE_CHECKING:
    import torch

MINIFY_ENTRY = "bringup.triage.work:run_minify"
BREAK_ENTRY = "bringup.triage.work:run_break"


def _zoo_step(p: dict[str, Any], device: torch.device, backend: str, fullgraph: bool = False) -> None:
    """One training step of the zoo case `p` compiled with `backend` on `device` (the zoo's own step)."""
    spec = ZooSpec.from_params(p)
    torch.manual_seed(spec.seed)
    built = build_model(spec)
    init = {k: v.detach().clone() for k, v in built.model.state_dict().items()}
    batch = built.make_batch(0)
    strict = getattr(torch._dynamo, "error_on_graph_break", None)  # a graph break raises (torch >= 2.9)
    if fullgraph and strict is not None:
        with strict(True):
            train_run(built, init, [batch], device, spec.prec, RunHow(backend=backend))
        return
    train_run(built, init, [batch], device, spec.prec, RunHow(backend=backend))


def _launcher(debug_root: Path) -> Path | None:
    found = sorted(debug_root.rglob("minifier_launcher.py"), key=lambda q: q.stat().st_mtime)
    return found[-1] if found else None


def _run_launcher(launcher: Path, cwd: Path, imports: list[str], budget: float, log: Path) -> tuple[int, bool]:
    """The minifier: the launcher run as a script, the device's plugins imported first (its backend and device
    must resolve there as in the run)."""
    code = (
        "import importlib, runpy, sys\n"
        f"for m in {imports!r}:\n    importlib.import_module(m)\n"
        f"sys.argv = [{str(launcher)!r}, 'minify']\n"
        f"runpy.run_path({str(launcher)!r}, run_name='__main__')\n"
    )
    cwd.mkdir(parents=True, exist_ok=True)
    env = child_env()
    env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(q) for q in sys.path if q and os.path.isdir(q))
    with open(log, "w") as out:
        p = subprocess.Popen([sys.executable, "-c", code], cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            return p.wait(timeout=budget), False
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            return -9, True


def run_minify(case: Case, ctx: Any) -> CaseResult:
    """PyTorch's minifier on the group's failing compile. `pass`: a minified repro.py was written (fields
    `repro`, `original`: the failure's exception key); `error` / `budget`: it was not (why in the reason)."""
    p = dict(case.params)
    zoo, backend = dict(p["zoo"]), str(p["zoo"]["backend"])
    after = "aot" if backend == "inductor" else "dynamo"
    work = ctx.artifact("minify")
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    r = CaseResult.for_case(case, Status.PASS)
    with torch._dynamo.config.patch(repro_after=after, repro_level=2, debug_dir_root=str(work / "debug")):
        try:
            _zoo_step(zoo, ctx.device.torch_device, backend)
        except Exception:
            r.error = traceback.format_exc()
    torch._dynamo.reset()
    if not r.error:
        return CaseResult.for_case(case, Status.ERROR, "the compile did not fail again (not reproduced)")
    r.fields["original"] = exception_key(exception_parts(r.error))
    launcher = _launcher(work / "debug")
    if launcher is None:
        return CaseResult.for_case(
            case, Status.ERROR, f"no minifier launcher was written (repro_after={after})", error=r.error
        )
    left = float(p["budget_s"]) - (time.monotonic() - t0)
    rc, late = _run_launcher(launcher, work / "minify", list(ctx.imports), max(30.0, left), work / "minifier.log")
    r.fields.update({"repro_after": after, "launcher": str(launcher), "minifier_log": str(work / "minifier.log")})
    minified = work / "minify" / "repro.py"
    if not minified.is_file():
        why = "over its budget" if late else f"exit {rc}, no repro.py"
        r.status, r.reason = (Status.BUDGET if late else Status.ERROR), f"minifier: {why}"
        return r
    out = work / "repro.py"
    out.write_text(clean_minified(minified.read_text(), list(ctx.imports)))
    r.fields.update({"repro": str(out), "nodes": _nodes(minified.read_text())})
    r.artifacts["repro"] = str(out)
    r.reason = f"minified ({after} minifier) to {r.fields['nodes']} node(s) in {time.monotonic() - t0:.0f} s"
    r.wall_s = time.monotonic() - t0
    return r


def _nodes(text: str) -> int:
    """Calls in the minified Repro.forward (its graph's nodes, placeholders and output aside)."""
    body = text.split("def forward", 1)[-1].split("\n\n", 1)[0]
    return sum(1 for ln in body.splitlines()[1:] if " = " in ln)


def _model_config(zoo: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """An hf case's tiny config (JSON values) and its model class's name in transformers."""

    model = build_model(zoo).model
    cfg = getattr(model, "config", None)
    if cfg is None or not hasattr(cfg, "to_json_string"):
        return None, ""
    return json.loads(cfg.to_json_string(use_diff=False)), type(model).__name__


def run_break(case: Case, ctx: Any) -> CaseResult:
    """The group's graph break with fullgraph=True, and a standalone script that shows it."""
    p = dict(case.params)
    zoo = dict(p["zoo"])
    work = ctx.artifact("break")
    work.mkdir(parents=True, exist_ok=True)
    r = CaseResult.for_case(case, Status.PASS)
    try:
        _zoo_step(zoo, ctx.device.torch_device, str(zoo["backend"]), fullgraph=True)
    except Exception:
        r.error = traceback.format_exc()
    if not r.error:
        return CaseResult.for_case(case, Status.ERROR, "fullgraph did not raise: no break reproduced")
    r.fields["original"] = exception_key(exception_parts(r.error))
    config, cls = _model_config(zoo) if zoo.get("source") == "hf" else (None, "")
    title, key = str(p.get("title") or ""), str(p.get("key") or "")
    text = break_script(zoo, list(ctx.imports), title, ctx.device.name, config, cls, key)
    if text is None:
        r.status, r.reason = Status.ERROR, f"no standalone script for a {zoo.get('source')} model"
        return r
    out = work / "repro.py"
    out.write_text(text)
    r.fields["repro"] = str(out)
    r.artifacts["repro"] = str(out)
    r.reason = "fullgraph repro written"
    return r
