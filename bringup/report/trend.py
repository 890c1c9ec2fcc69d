"""When a line on the history page moved beyond its noise: the rule, as pure functions over numbers.

A point moved when it is further from the median of the runs before it than K times their robust
spread:

    |value - median(before)| > K * max(1.4826 * MAD(before), REL_FLOOR * |median(before)|)

`before` is the last WINDOW runs of the same line since its last move (a move starts a new level), and
at least MIN_POINTS of them; with fewer nothing is judged. Why these numbers:

- MIN_POINTS = 4: a median and a MAD of 3 or fewer runs say nothing about the noise (with 3, the MAD is
  the distance of one run to another).
- WINDOW = 10: about two weeks of nightly runs: recent enough that slow drifts (a warmer cache, another
  tenant on the machine) do not widen the band, enough runs for the MAD to settle.
- K = 4: 1.4826 x MAD estimates the standard deviation for normal noise; a band of 4 of them from 4-10
  runs calls pure noise a move at 0.4-0.75% of the points (3-5% noise: one false move per 130-250 runs
  of a line), and catches a 20% throughput drop at its run 93% of the time on a line with 3% noise, 50%
  with 5% (a 40% drop: 97%); `python bench/history_rule.py` measures these. K = 3 triples the false
  moves for the same power at 20%; K = 5 misses one more 20% drop in ten.
- REL_FLOOR = 1% of the level for timings and throughputs: below what any shared machine reproduces,
  so that runs that happen to agree to the digit (MAD 0) do not make every later wobble a move. Pass
  rates have no floor: with every run before at the same rate, one more failing case is a move.

A point beyond the band whose next run is back inside it is a one-run `outlier`, not a move (the level
stays); beyond the band with no next run yet is a move `unconfirmed` (the latest run).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

MAD_TO_SIGMA = 1.4826  # the MAD of normal noise x this = its standard deviation


@dataclass(frozen=True)
class Rule:
    k: float = 4.0
    window: int = 10
    min_points: int = 4
    rel_floor: float = 0.01

    def describe(self) -> str:
        floor = f", at least {self.rel_floor:.0%} of the level" if self.rel_floor else ""
        return (
            f"a point moved when it is more than {self.k:g} x the robust spread (1.4826 x MAD{floor}) away "
            f"from the median of the up to {self.window} runs before it on the same line since its last "
            f"move; never judged on fewer than {self.min_points} runs before it"
        )


TIMING = Rule()
PASS_RATE = Rule(rel_floor=0.0)


@dataclass(frozen=True)
class Move:
    index: int  # position in the values
    kind: str  # moved | outlier
    confirmed: bool  # moved: the next run stayed beyond the old band (False: it is the latest run)
    before: float  # the median of the runs judged against
    value: float
    spread: float  # the band's unit: max(1.4826 x MAD, floor)
    runs_before: int

    @property
    def change(self) -> float:
        return self.value - self.before

    @property
    def relative(self) -> float | None:
        return self.change / abs(self.before) if self.before else None


def band(before: Sequence[float], rule: Rule) -> tuple[float, float]:
    """(median, spread) of the runs before a point."""
    med = statistics.median(before)
    mad = statistics.median(abs(v - med) for v in before)
    return med, max(MAD_TO_SIGMA * mad, rule.rel_floor * abs(med))


def find_moves(values: Sequence[float], rule: Rule = TIMING) -> list[Move]:
    """Every point of one line (values in run order) that moved or was a one-run outlier (module doc)."""
    moves: list[Move] = []
    start = 0  # where the current level began
    for i, v in enumerate(values):
        before = values[max(start, i - rule.window) : i]
        if len(before) < rule.min_points:
            continue
        med, spread = band(before, rule)
        if abs(v - med) <= rule.k * spread:
            continue
        nxt = values[i + 1] if i + 1 < len(values) else None
        if nxt is not None and abs(nxt - med) <= rule.k * spread:
            moves.append(Move(i, "outlier", False, med, v, spread, len(before)))
            continue
        moves.append(Move(i, "moved", nxt is not None, med, v, spread, len(before)))
        start = i
    return moves
