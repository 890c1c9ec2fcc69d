"""One standalone repro per group, checked before it is attached (bringup/triage/verify.py: it fails on the device
with the group's signature and passes on cpu):

- wrong numbers, localized to an op: localize's op repro (bringup/localize/repro.py), as one file with its inputs
  inline (zlib, base64) when they fit an issue;
- CPU fallback: the group's ops called with the shapes and dtypes the sweep recorded (bringup/triage/fallback_repro.py);
- compile failure: PyTorch's minifier's repro (bringup/triage/work.py ran it; the cpu check runs the same script
  aimed at cpu);
- graph break (silent eager): the model compiled with fullgraph=True.

Other kinds (crash, budget, oom, a numeric failure no op explains) get no script: the issue says why and gives the
bringup command that reproduces the case.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bringup.case import CaseResult
from bringup.checks.failure_text import exception_key
from bringup.localize.repro import inline_script
from bringup.triage.compile_repro import compiled_runner, retarget
from bringup.triage.fallback_repro import calls_for, script
from bringup.triage.groups import Group
from bringup.triage.verify import Check, check, python

MAX_INLINE = 45_000  # characters of repro an issue carries inline (GitHub's body limit is 65,536)


@dataclass
class Repro:
    how: str  # what made it, in words ("" when there is none)
    script: Path | None = None  # the one file to run (self-contained when `attach` is empty)
    attach: list[Path] = field(default_factory=list)  # files it reads, beside it, when not inline
    check: Check | None = None
    note: str = ""  # why there is none, or what to know about it
    run_device: str = ""  # how to run it on the device
    run_cpu: str = ""  # and on cpu
    # what `bringup bisect` runs when not the script itself: a minified repro through torch.compile, so that
    # PyTorch's compiler bisector can split it
    bisect_target: Path | None = None
    backend: str = ""  # the compile backend the repro goes through ("" for none)

    @property
    def text(self) -> str:
        return self.script.read_text() if self.script is not None and self.script.is_file() else ""

    def to_json(self) -> dict[str, Any]:
        return {
            "how": self.how,
            "script": str(self.script) if self.script else None,
            "attach": [str(p) for p in self.attach],
            "note": self.note,
            "verdict": self.check.verdict if self.check else ("no repro" if self.script is None else "not checked"),
            "check": self.check.to_json() if self.check else None,
        }


@dataclass(frozen=True)
class Context:
    """What making a group's repro reads: the run's cases, their localizations, triage's own work results
    (minifier, fullgraph: by group id), the device and its plugins, the check's time limit."""

    device: str
    imports: tuple[str, ...]
    results: Mapping[str, CaseResult]
    joined: Mapping[str, Mapping[str, Any]]
    work: Mapping[str, CaseResult]
    check_budget: float
    do_check: bool = True


def expected_signature(g: Group) -> str:
    """What the group's repro says when it fails: the group's key, printed by the scripts bringup writes; for a
    compile failure, the exception key its traceback reads as (bringup.checks.failure_text)."""
    if g.signature.kind in ("compile", "unsupported", "error"):
        return exception_key(g.signature.parts)
    return g.signature.key


def _checked(r: Repro, g: Group, gdir: Path, ctx: Context, cpu_script: Path | None = None) -> Repro:
    assert r.script is not None
    dev_cmd = [python(), str(r.script)]
    cpu_cmd = [python(), str(cpu_script)] if cpu_script else [python(), str(r.script), "--device", "cpu"]
    r.run_device = f"python {r.script.name}"
    r.run_cpu = f"python {cpu_script.name}" if cpu_script else f"python {r.script.name} --device cpu"
    if ctx.do_check:
        r.check = check(dev_cmd, cpu_cmd, gdir, ctx.device, expected_signature(g), ctx.check_budget)
    return r


def numeric_repro(g: Group, gdir: Path, ctx: Context) -> Repro:
    if g.signature.resolution != "op":
        why = "no single aten op is off alone" if g.signature.resolution == "module" else "not localized"
        return Repro("", note=f"no op repro: {why} (the group's signature is at {g.signature.resolution} level)")
    src = next(
        (
            Path(str(ctx.joined[c.case_id]["repro"])).parent
            for c in g.cases
            if c.case_id in ctx.joined and Path(str(ctx.joined[c.case_id].get("repro") or "")).is_file()
        ),
        None,
    )
    if src is None:
        return Repro("", note="localize named the op but wrote no repro (see its reason)")
    op_dir = gdir / "op"
    shutil.copytree(src, op_dir, dirs_exist_ok=True)
    text = inline_script(op_dir, signature=g.signature.key)
    script = gdir / "repro.py"
    if len(text) <= MAX_INLINE:
        script.write_text(text)
        r = Repro("localize's op repro (bringup/localize/repro.py), inputs inline", script)
    else:
        meta = json.loads((op_dir / "op.json").read_text())
        (op_dir / "op.json").write_text(json.dumps({**meta, "signature": g.signature.key}, indent=2) + "\n")
        script = op_dir / "repro.py"
        r = Repro(
            "localize's op repro (bringup/localize/repro.py)",
            script,
            [op_dir / "op.json", op_dir / "inputs.safetensors"],
        )
        size = (op_dir / "inputs.safetensors").stat().st_size
        r.note = f"its inputs ({size:,} bytes) are too large to inline: attach them"
    return _checked(r, g, gdir, ctx)


def fallback_repro(g: Group, gdir: Path, ctx: Context) -> Repro:
    for c in g.cases:
        r = ctx.results.get(c.case_id)
        examples = (r.fields.get("fallback_examples") if r is not None else None) or {}
        calls, missing = calls_for(g.signature.parts.get("ops", []), examples)
        if calls:
            path = gdir / "repro.py"
            path.write_text(script(g.signature.title, ctx.device, ctx.imports, g.signature.key, calls))
            rep = Repro("the ops with the shapes and dtypes the sweep recorded", path)
            if missing:
                rep.note = f"no call recorded for {', '.join(missing)} (the backend's own counter named them)"
            return _checked(rep, g, gdir, ctx)
    return Repro("", note="the cases recorded no call of these ops (a run from before bringup recorded them)")


def compile_repro(g: Group, gdir: Path, ctx: Context) -> Repro:
    w = ctx.work.get(g.signature.id)
    if w is None:
        return Repro("", note="PyTorch's minifier did not run for this group (no zoo case, or over the budget)")
    src = Path(str(w.fields.get("repro") or ""))
    if not src.is_file():
        return Repro("", note=f"no repro: {w.reason}")
    text = src.read_text()
    script = gdir / "repro.py"
    script.write_text(text)
    how = (
        f"PyTorch's minifier (repro_after={w.fields.get('repro_after')}), {w.fields.get('nodes')} node(s)"
        if g.signature.kind != "break"
        else "the model compiled with fullgraph=True"
    )
    rep = Repro(how, script, backend=str((w.params.get("zoo") or {}).get("backend") or ""))
    if g.signature.kind == "break":
        return _checked(rep, g, gdir, ctx)
    cpu = gdir / "repro_cpu.py"
    cpu.write_text(retarget(text, ctx.device.split(":")[0]))
    rep.bisect_target = gdir / "bisect_target.py"
    rep.bisect_target.write_text(compiled_runner(rep.backend or "inductor"))
    return _checked(rep, g, gdir, ctx, cpu)


def make(g: Group, gdir: Path, ctx: Context) -> Repro:
    gdir.mkdir(parents=True, exist_ok=True)
    kind = g.signature.kind
    if kind == "numeric":
        return numeric_repro(g, gdir, ctx)
    if kind == "fallback":
        return fallback_repro(g, gdir, ctx)
    if kind in ("compile", "break"):
        return compile_repro(g, gdir, ctx)
    return Repro("", note=f"no standalone repro for a {kind} group: the bringup command below reproduces its cases")
