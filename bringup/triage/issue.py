"""One issue-ready Markdown file per group: title, reach, expected vs actual, the localize line, the repro inline
(checked: fails on the device, passes on cpu), the bisection when asked, and the environment from PyTorch's own
`torch.utils.collect_env`. Written to paste into a GitHub issue as it is: no path of this machine in it (files
are named by their names), one fenced block per script, the environment folded.
"""

from __future__ import annotations

import datetime as dt
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from bringup.checks.failure_text import parse_traceback
from bringup.triage.groups import Group
from bringup.triage.repro import Repro

EXPECTED = {
    "numeric": "the op's result on the device matches float64 as closely as cpu computes it in the same dtype "
    "(bringup's module rule: size within 3x the trusted cpu error, no bias the cpu run does not have)",
    "fallback": "every op runs natively on the device (no copy to the host and back through the CPU fallback)",
    "compile": "the graph compiles with the backend on the device, as it does on cpu",
    "break": "dynamo captures the model in one graph (fullgraph=True compiles), as the backend needs",
    "unsupported": "the op or feature runs on the device",
    "crash": "the worker finishes the case",
    "budget": "the phase finishes within the case's budget",
    "oom": "the case fits the device's memory",
    "error": "bringup runs the case (this is bringup's own bug: report it to bringup)",
}


def environment() -> str:
    """PyTorch's own environment report (what its issue template asks for)."""
    try:
        from torch.utils.collect_env import get_pretty_env_info  # lazy: optional

        return str(get_pretty_env_info())
    except Exception as e:  # collect_env shells out (pip, nvidia-smi...): a failure is said, not fatal
        return f"torch.utils.collect_env failed: {type(e).__name__}: {e}"


_ABS_PATH = re.compile(r"(?<![\w.])/(?:[\w.@+-]+/)+([\w.@+-]+)")


def portable(text: str) -> str:
    """Absolute paths of this machine reduced to their last part (an issue names files, not where they lay)."""
    return _ABS_PATH.sub(r"\1", text)


def _when(t: float | None) -> str:
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%d") if t else "?"


def _reach(g: Group, block: Mapping[str, Any]) -> list[str]:
    j = g.to_json()
    r = j["reach"]
    lines = [
        f"- **{r['cases']} case(s), {r['models']} model(s)**: {', '.join(f'`{m}`' for m in j['models'][:30])}"
        + (" ..." if len(j["models"]) > 30 else ""),
        f"- dtypes: {', '.join(j['dtypes']) or '-'}; devices: {', '.join(j['devices'])}; "
        f"statuses: {', '.join(j['statuses'])}",
    ]
    if r["hub_ids"]:
        top = ", ".join(f"`{h['model_id']}` ({int(h.get('downloads') or 0):,})" for h in j["hub_top"])
        lines.append(f"- Hugging Face Hub: {r['hub_ids']} model id(s), {r['downloads']:,} downloads; most used: {top}")
    first, last = j.get("first_seen") or {}, j.get("last_seen") or {}
    lines.append(
        f"- seen in {j['runs_seen']} run(s): first `{first.get('run_id')}` ({_when(first.get('at'))}), "
        f"last `{last.get('run_id')}` ({_when(last.get('at'))})"
    )
    if j.get("inferred"):
        lines.append(
            f"- {len(j['inferred'])} case(s) joined by their first module off (the module check), not localized "
            "one by one: their localized peers all name this op"
        )
    return lines


def _actual(g: Group, rep: Repro | None) -> str:
    """What the device did: the repro's own words on the device (a traceback's exception line, else its output),
    else the cases' reasons."""
    if rep is not None and rep.check is not None and rep.check.runs:
        tail = rep.check.runs[0].tail
        tb = parse_traceback(tail if "Traceback" in tail else "Traceback (most recent call last):\n" + tail)
        return portable(f"{tb.exc_type}: {tb.message}" if tb is not None and "File " in tail else tail)
    return portable("\n".join(f"{c.name}: {c.reason}" for c in g.cases[:5]))


def _repro_section(rep: Repro | None) -> list[str]:
    if rep is None:
        return ["## Repro", "", "Not made (`bringup triage --no-repro`)."]
    if rep.script is None:
        return ["## Repro", "", f"No standalone repro: {rep.note}."]
    chk = rep.check
    if chk is None:
        state = "not checked"
    else:
        state = "checked: fails on the device, passes on cpu" if chk.ok else f"**not confirmed: {chk.verdict}**"
    out = ["## Repro", "", f"{rep.how}; {state}.", ""]
    if rep.note:
        out += [f"Note: {rep.note}.", ""]
    out += [f"`{rep.script.name}` (run: `{rep.run_device}`; on cpu: `{rep.run_cpu}`):", "", "```python"]
    out += [portable(rep.text).rstrip("\n"), "```", ""]
    if rep.attach:
        out += ["Files it reads, beside it (attach them): " + ", ".join(f"`{p.name}`" for p in rep.attach), ""]
    for run in chk.runs if chk is not None else []:
        rc = "timed out" if run.timed_out else f"exit {run.exit_code}"
        out += [f"On {run.where} ({rc}, {run.seconds:.0f} s):", "", "```", portable(run.tail), "```", ""]
    return out


def _bisect_section(b: Mapping[str, Any] | None) -> list[str]:
    if not b:
        return []
    out = [
        "## Bisection",
        "",
        f"`bringup bisect` over {portable(str(b.get('source', '?')))}: **{portable(str(b.get('message', '')))}**",
    ]
    for kind, f in (b.get("followups") or {}).items():
        out.append(f"- {kind.replace('_', ' ')} on {f.get('label')}: {portable(str(f.get('reason', '')))}")
    return [*out, ""]


def render(
    g: Group,
    rank: int,
    block: Mapping[str, Any],
    run: Any,
    rep: Repro | None,
    env: str,
    bisect: Mapping[str, Any] | None = None,
) -> str:
    sig = g.signature
    loc = sig.parts.get("localize") or ""
    lines = [
        f"# [{run.device}] {sig.title}",
        "",
        f"Bug {rank} of {len(block.get('groups', []))} found by `bringup triage` in run `{run.run_id}` "
        f"({_when(run.started_at)}, torch {run.torch_version}, {run.device} {run.device_name}).",
        "",
        f"Root-cause signature ({sig.kind}): `{sig.key}`",
        "",
        "## Affected models and reach",
        "",
        *_reach(g, block),
        "",
        "## Expected vs actual",
        "",
        f"- expected: {EXPECTED.get(sig.kind, 'the case passes')}",
        "- actual:",
        "",
        "```",
        _actual(g, rep),
        "```",
        "",
    ]
    if loc or sig.kind == "numeric":
        lines += ["## Localize", "", portable(str(loc)) or "not localized to an op (see the signature)", ""]
    lines += _repro_section(rep)
    lines += _bisect_section(bisect)
    cmd = shlex.join(["bringup", *(portable(a) for a in run.argv)]) if run.argv else run.command
    lines += [
        "## How it was found",
        "",
        f"```\n{cmd}\n```",
        "",
        "## Environment",
        "",
        "<details><summary>python -m torch.utils.collect_env</summary>",
        "",
        "```",
        portable(env).rstrip("\n"),
        "```",
        "",
        "</details>",
        "",
    ]
    return "\n".join(lines)


def index(groups: Sequence[tuple[int, Group, str, Repro | None]], run: Any) -> str:
    """The folder's README: one line per group, largest reach first."""
    rows = ["| # | kind | bug | reach | repro | issue |", "| --- | --- | --- | --- | --- | --- |"]
    for rank, g, fname, rep in groups:
        r = g.to_json()["reach"]
        verdict = rep.to_json()["verdict"] if rep is not None else "not made"
        reach = f"{r['cases']} cases, {r['models']} models" + (
            f", {r['downloads']:,} downloads" if r["downloads"] else ""
        )
        title = g.signature.title.replace("|", "\\|")
        rows.append(f"| {rank} | {g.signature.kind} | {title} | {reach} | {verdict} | [{fname}]({fname}) |")
    head = f"# Bugs behind run `{run.run_id}` ({run.device}, torch {run.torch_version})\n\n"
    return head + "\n".join(rows) + "\n"
