"""What torch.compile made of a model: graphs, graph breaks (with reasons), recompiles, compile time.

`watch()` wraps the real compiled run (no second compile): it resets dynamo, then reads dynamo's own
bookkeeping afterwards: `counters["stats"]["unique_graphs"]` (graphs compiled),
`counters["graph_break"]` (reason -> occurrences), the compilation metrics (one per compiled frame;
`recompile_reason` set on recompiles) and `calculate_time_spent()` (dynamo + backend compile time,
forward and backward).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

_REASON_LEN = 200


@dataclass
class GraphReport:
    graph_count: int = 0
    graph_breaks: int = 0
    break_reasons: dict[str, int] = field(default_factory=dict)  # first line of the reason -> count
    recompiles: int = 0
    recompile_reasons: list[str] = field(default_factory=list)
    compile_s: float = 0.0
    # the backend raised on a graph and dynamo ran that frame eager instead (an exception it allows to fall back:
    # a data-dependent op in the backend's own code, a fake-tensor failure): first line of the reason -> count
    backend_errors: dict[str, int] = field(default_factory=dict)

    def fields(self) -> dict[str, Any]:
        """What a case records of its compiled run's graphs (compile_s aside: the caller's fallback differs)."""
        return {
            "graph_count": self.graph_count,
            "graph_breaks": self.graph_breaks,
            "break_reasons": self.break_reasons,
            "recompiles": self.recompiles,
            "recompile_reasons": self.recompile_reasons,
            "backend_errors": self.backend_errors,
        }

    def backend_failure(self) -> str:
        """'' or what a case says when the backend raised and dynamo silently ran its graphs eager."""
        if not self.backend_errors:
            return ""
        n = sum(self.backend_errors.values())
        first = next(iter(self.backend_errors))
        return f"the backend raised on {n} graph(s) and dynamo ran them eager: {first}"


def short_reason(reason: Any) -> str:
    text = str(getattr(reason, "reason", reason)).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    # dynamo's messages start with a headline ("Graph break due to unsupported builtin ...") and often
    # carry an "Explanation:" line; keep the headline and the explanation
    head = lines[0] if lines else ""
    expl = next((ln for ln in lines[1:] if ln.startswith("Explanation:")), "")
    out = f"{head} {expl}".strip()
    return out[:_REASON_LEN]


@contextmanager
def watch(reset: bool = True) -> Iterator[GraphReport]:
    """Fill a GraphReport with what dynamo compiled inside the block."""
    import torch._dynamo  # lazy: planning imports no torch._dynamo
    from torch._dynamo import utils as du  # lazy: planning imports no torch._dynamo

    if reset:
        torch._dynamo.reset()
    du.counters.clear()
    if hasattr(du, "clear_compilation_metrics"):
        du.clear_compilation_metrics()
    t0 = du.calculate_time_spent().get("total_wall_time", 0.0)
    rep = GraphReport()
    try:
        yield rep
    finally:
        stats = du.counters.get("stats", Counter())
        rep.graph_count = int(stats.get("unique_graphs", 0))
        breaks = du.counters.get("graph_break", Counter())
        rep.break_reasons = {}
        for reason, n in breaks.items():
            key = short_reason(reason)
            rep.break_reasons[key] = rep.break_reasons.get(key, 0) + int(n)
        rep.graph_breaks = sum(rep.break_reasons.values())
        rep.backend_errors = _backend_errors(du.counters.get("unimplemented", {}))
        metrics = du.get_compilation_metrics() if hasattr(du, "get_compilation_metrics") else []
        reasons = [str(m.recompile_reason) for m in metrics if getattr(m, "recompile_reason", None)]
        rep.recompiles = len(reasons)
        rep.recompile_reasons = [r.splitlines()[0][:_REASON_LEN] for r in reasons]
        rep.compile_s = max(0.0, du.calculate_time_spent().get("total_wall_time", 0.0) - t0)


BACKEND_EXCEPTION = "Backend compiler exception"  # dynamo's gb_type when a backend's allowed exception falls back


def _backend_errors(unimplemented: Any) -> dict[str, int]:
    """dynamo's `unimplemented` counter entries for a backend that raised (it logs them as a graph break of type
    BACKEND_EXCEPTION, runs the frame eager, and counts no graph break): the backend's exception, by first line."""
    out: dict[str, int] = {}
    for reason, n in dict(unimplemented).items():
        text = str(reason)
        if not text.startswith(BACKEND_EXCEPTION):
            continue
        expl = next((ln.strip() for ln in text.splitlines() if ln.strip().startswith("Explanation:")), text)
        key = expl.removeprefix("Explanation:").strip().split(". Adding a graph break")[0][:_REASON_LEN]
        out[key] = out.get(key, 0) + int(n)
    return out
