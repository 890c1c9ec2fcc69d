"""Inline SVG plots for the HTML scorecard: no JS, no CDN, every label HTML-escaped.

Each function returns one `<svg>` element as a string (or a short `<p>` saying why there is nothing to
draw). Colours come from CSS custom properties where the page defines them, so the plots follow the
page's light/dark theme; the fallbacks keep a standalone SVG readable.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape

from bringup.report.palette import STATUS_COLOURS, status_colour, text_on

# Distinguishable on light and dark backgrounds (Okabe-Ito + two).
PALETTE: tuple[str, ...] = (
    "#0072B2",
    "#E69F00",
    "#009E73",
    "#CC79A7",
    "#D55E00",
    "#56B4E9",
    "#F0E442",
    "#999999",
    "#7F3C8D",
    "#11A579",
)

NO_CASE_COLOUR = "#e9ecef"


def esc(s: object) -> str:
    return escape(str(s), quote=True)


def _finite(v: float) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v)


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About n round tick values covering [lo, hi]."""
    if not (_finite(lo) and _finite(hi)):
        return [0.0]
    if hi < lo:
        lo, hi = hi, lo
    if hi == lo:
        pad = abs(hi) * 0.1 or 1.0
        lo, hi = lo - pad, hi + pad
    raw = (hi - lo) / max(n, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks: list[float] = []
    t = start
    while t <= hi + step * 0.5 and len(ticks) < 50:
        ticks.append(round(t, 12))
        t += step
    return ticks


def fmt_num(v: float) -> str:
    if not _finite(v):
        return "-"
    a = abs(v)
    if a == 0:
        return "0"
    if a >= 1e9:
        return f"{v / 1e9:.3g}G"
    if a >= 1e6:
        return f"{v / 1e6:.3g}M"
    if a >= 1e4:
        return f"{v / 1e3:.3g}k"
    if a >= 0.01:
        return f"{v:.4g}"
    return f"{v:.2e}"


@dataclass(frozen=True)
class _Frame:
    width: int
    height: int
    left: int = 64
    right: int = 16
    top: int = 28
    bottom: int = 44

    @property
    def pw(self) -> int:
        return self.width - self.left - self.right

    @property
    def ph(self) -> int:
        return self.height - self.top - self.bottom


def _svg_open(width: int, height: int, title: str, css_class: str) -> str:
    return (
        f'<svg class="plot {esc(css_class)}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}"'
        f' width="{width}" height="{height}" role="img" aria-label="{esc(title)}"><title>{esc(title)}</title>'
    )


@dataclass(frozen=True)
class _Axes:
    """A frame and its data ranges: data -> pixel (y in the log10 space on a log axis)."""

    f: _Frame
    x0: float
    x1: float
    y0: float
    y1: float
    log_y: bool

    def px(self, x: float) -> float:
        return self.f.left + (x - self.x0) / (self.x1 - self.x0) * self.f.pw

    def pyt(self, t: float) -> float:  # a value already in the axis' (log10 or linear) space: a tick
        return self.f.top + self.f.ph - (t - self.y0) / (self.y1 - self.y0) * self.f.ph

    def py(self, y: float) -> float:
        return self.pyt(math.log10(y) if self.log_y else y)

    def y_grid(self, ticks: Sequence[float]) -> list[str]:
        """A grid line and a label per y tick (labels in data space on a log axis)."""
        f, out = self.f, []
        for t in ticks:
            y = self.pyt(t)
            label = fmt_num(10**t) if self.log_y else fmt_num(t)
            out.append(f'<line class="grid" x1="{f.left}" x2="{f.left + f.pw}" y1="{y:.1f}" y2="{y:.1f}"/>')
            out.append(f'<text class="tick" x="{f.left - 6}" y="{y + 4:.1f}" text-anchor="end">{esc(label)}</text>')
        return out

    def legend_line(self, i: int, colour: str, dash: str) -> tuple[str, float, float]:
        """The i-th legend entry's line right of the plot, and where its text goes."""
        ly = self.f.top + 6 + i * 18
        lx = self.f.left + self.f.pw + 12
        line = f'<line x1="{lx}" x2="{lx + 18}" y1="{ly}" y2="{ly}" stroke="{colour}" stroke-width="3"{dash}/>'
        return line, lx + 24, ly + 4


def _style(i: int) -> tuple[str, str]:
    """The i-th series' colour, dashed once the palette is used up."""
    return PALETTE[i % len(PALETTE)], ' stroke-dasharray="6 3"' if i >= len(PALETTE) else ""


def line_chart(
    series: Mapping[str, Sequence[tuple[float, float]]],
    title: str,
    xlabel: str = "step",
    ylabel: str = "",
    width: int = 640,
    height: int = 320,
    log_y: bool = False,
) -> str:
    """One line per series (points with non-finite values are dropped), axes, ticks and a legend."""
    clean = {
        k: [(float(x), float(y)) for x, y in pts if _finite(x) and _finite(y) and (not log_y or y > 0)]
        for k, pts in series.items()
    }
    clean = {k: v for k, v in clean.items() if v}
    if not clean:
        return f'<p class="empty">{esc(title)}: no finite data points to plot.</p>'
    f = _Frame(width, height, left=64, right=150 if len(clean) > 1 else 16)
    xs = [x for pts in clean.values() for x, _ in pts]
    ys = [y for pts in clean.values() for _, y in pts]
    ty = (lambda v: math.log10(v)) if log_y else (lambda v: v)
    xt = nice_ticks(min(xs), max(xs))
    yt = nice_ticks(ty(min(ys)), ty(max(ys)))
    x0, x1 = min(xt[0], min(xs)), max(xt[-1], max(xs))
    y0, y1 = min(yt[0], ty(min(ys))), max(yt[-1], ty(max(ys)))
    ax = _Axes(f, x0, x1 if x1 > x0 else x0 + 1, y0, y1 if y1 > y0 else y0 + 1, log_y)
    out = [_svg_open(width, height, title, "line-chart")]
    out.append(f'<text class="plot-title" x="{f.left}" y="16">{esc(title)}</text>')
    out += ax.y_grid(yt)
    for t in xt:
        x = ax.px(t)
        out.append(f'<line class="grid" x1="{x:.1f}" x2="{x:.1f}" y1="{f.top}" y2="{f.top + f.ph}"/>')
        out.append(
            f'<text class="tick" x="{x:.1f}" y="{f.top + f.ph + 16}" text-anchor="middle">{esc(fmt_num(t))}</text>'
        )
    out += _frame_and_labels(f, height, xlabel, ylabel, log_y)
    for i, (name, pts) in enumerate(clean.items()):
        out += _line_series(ax, i, name, sorted(pts), len(clean) > 1)
    out.append("</svg>")
    return "".join(out)


def _line_series(ax: _Axes, i: int, name: str, pts: list[tuple[float, float]], legend: bool) -> list[str]:
    """One series of a line chart: its polyline, its points (at most ~60, with tooltips), its legend entry."""
    colour, dash = _style(i)
    d = " ".join(f"{ax.px(x):.1f},{ax.py(y):.1f}" for x, y in pts)
    out = [f'<g class="series" data-series="{esc(name)}"><title>{esc(name)}</title>']
    if len(pts) > 1:
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2"{dash} points="{d}"/>')
    for x, y in pts if len(pts) <= 60 else pts[:: max(1, len(pts) // 60)]:
        out.append(
            f'<circle cx="{ax.px(x):.1f}" cy="{ax.py(y):.1f}" r="2.5" fill="{colour}">'
            f"<title>{esc(name)}: step {esc(fmt_num(x))}, {esc(fmt_num(y))}</title></circle>"
        )
    out.append("</g>")
    if legend:
        line, tx, ty = ax.legend_line(i, colour, dash)
        out.append(line)
        out.append(f'<text class="legend" x="{tx}" y="{ty}">{esc(_clip(name, 18))}</text>')
    return out


@dataclass(frozen=True)
class TrendPoint:
    """One run on a trend line: x (the run's position on the page), y, its tooltip, and a mark: "" (none),
    "moved" (a move beyond the noise, bringup/report/trend.py) or "outlier" (one run beyond it)."""

    x: float
    y: float
    title: str
    mark: str = ""
    run: str = ""


def trend_chart(
    lines: Mapping[str, Sequence[TrendPoint]],
    title: str,
    ylabel: str,
    x_ticks: Sequence[tuple[float, str]],
    xlabel: str = "run",
    width: int = 720,
    height: int = 300,
    y_bounds: tuple[float | None, float | None] = (None, None),
) -> str:
    """One line per series over the runs (x: the run's number on the page, labelled by `x_ticks`); each
    point has its own tooltip; marked points get a ring (moved: solid, outlier: dashed) and their run id
    as data-run. A log y axis when positive values span more than 30x (two machines on one chart).
    `y_bounds` (floor, ceiling): a linear axis reaches down to the floor, and up to the ceiling when
    the values reach half of it (a percentage: 0 and 100)."""
    clean = {k: [p for p in pts if _finite(p.x) and _finite(p.y)] for k, pts in lines.items()}
    clean = {k: sorted(v, key=lambda p: p.x) for k, v in clean.items() if v}
    if not clean:
        return f'<p class="empty">{esc(title)}: no finite data points to plot.</p>'
    f = _Frame(width, height, left=64, right=190)
    ax, yt = _trend_axes(f, clean, x_ticks, y_bounds)
    out = [_svg_open(width, height, title, "trend-chart")]
    out.append(f'<text class="plot-title" x="{f.left}" y="16">{esc(title)}</text>')
    out += ax.y_grid(yt)
    step = max(1, math.ceil(len(x_ticks) / 16))
    for x, label in list(x_ticks)[::step]:
        out.append(
            f'<text class="tick" x="{ax.px(x):.1f}" y="{f.top + f.ph + 16}" text-anchor="middle">{esc(label)}</text>'
        )
    out += _frame_and_labels(f, height, xlabel, ylabel, ax.log_y)
    for i, (name, pts) in enumerate(clean.items()):
        out += _trend_series(ax, i, name, pts)
    out.append("</svg>")
    return "".join(out)


def _trend_axes(
    f: _Frame,
    clean: dict[str, list[TrendPoint]],
    x_ticks: Sequence[tuple[float, str]],
    y_bounds: tuple[float | None, float | None],
) -> tuple[_Axes, list[float]]:
    """The trend chart's axes (log y when positive values span more than 30x) and its y ticks."""
    y_floor, y_ceiling = y_bounds
    ys = [p.y for pts in clean.values() for p in pts]
    log_y = min(ys) > 0 and max(ys) / min(ys) > 30
    ty = (lambda v: math.log10(v)) if log_y else (lambda v: v)
    lo, hi = ty(min(ys)), ty(max(ys))
    if not log_y:
        lo = min(lo, y_floor) if y_floor is not None else lo
        hi = max(hi, y_ceiling) if y_ceiling is not None and max(ys) > 0.5 * y_ceiling else hi
    yt = nice_ticks(lo, hi)
    y0, y1 = min(yt[0], lo), max(yt[-1], hi)
    xs = [x for x, _ in x_ticks] or [p.x for pts in clean.values() for p in pts]
    return _Axes(f, min(xs) - 0.5, max(xs) + 0.5, y0, y1 if y1 > y0 else y0 + 1, log_y), yt


def _trend_series(ax: _Axes, i: int, name: str, pts: list[TrendPoint]) -> list[str]:
    """One trend line: its polyline, its points (a ring on the marked ones), its legend entry."""
    colour, dash = _style(i)
    out = [f'<g class="series" data-series="{esc(name)}"><title>{esc(name)}</title>']
    if len(pts) > 1:
        d = " ".join(f"{ax.px(p.x):.1f},{ax.py(p.y):.1f}" for p in pts)
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2"{dash} points="{d}"/>')
    for p in pts:
        cx, cyp = ax.px(p.x), ax.py(p.y)
        out.append(f'<circle cx="{cx:.1f}" cy="{cyp:.1f}" r="3" fill="{colour}"><title>{esc(p.title)}</title></circle>')
        if p.mark:
            ring = ' stroke-dasharray="3 2"' if p.mark != "moved" else ""
            out.append(
                f'<circle class="mark {esc(p.mark)}" data-run="{esc(p.run)}" cx="{cx:.1f}" cy="{cyp:.1f}"'
                f' r="8" fill="none" stroke="{colour}" stroke-width="2.5"{ring}>'
                f"<title>{esc(p.mark)}: {esc(p.title)}</title></circle>"
            )
    out.append("</g>")
    line, tx, ty = ax.legend_line(i, colour, dash)
    out.append(line)
    out.append(f'<text class="legend" x="{tx}" y="{ty}">{esc(_clip(name, 26))}<title>{esc(name)}</title></text>')
    return out


def stacked_bars(
    bars: Sequence[tuple[str, Sequence[tuple[str, float]]]],
    title: str,
    unit: str = "s",
    width: int = 720,
    last: Sequence[str] = (),
    colours: dict[str, str] | None = None,
) -> str:
    """Horizontal stacked bars: one bar per (label, [(segment, value), ...]); a legend of segment names
    (in order of first appearance, the names in `last` at the end; `colours` fixes some colours).
    Non-finite and negative segments are drawn as zero (and shown as '-' in the tooltip)."""
    bars = [(label, [(s, v) for s, v in segs]) for label, segs in bars]
    if not bars:
        return f'<p class="empty">{esc(title)}: nothing to plot.</p>'
    seg_names: list[str] = []
    for _, segs in bars:
        for s, _ in segs:
            if s not in seg_names:
                seg_names.append(s)
    seg_names = [s for s in seg_names if s not in last] + [s for s in last if s in seg_names]
    colour = {s: PALETTE[i % len(PALETTE)] for i, s in enumerate(seg_names)} | (colours or {})
    totals = [sum(v for _, v in segs if _finite(v) and v > 0) for _, segs in bars]
    vmax = max(totals) if totals and max(totals) > 0 else 1.0
    ticks = nice_ticks(0.0, vmax)
    vmax = max(vmax, ticks[-1])
    bar_h, gap = 22, 10
    label_w = min(220, 12 + 7 * max(len(label) for label, _ in bars))
    legend_rows = math.ceil(len(seg_names) / 4)
    f = _Frame(width, 0, left=label_w, right=70, top=28 + 18 * legend_rows, bottom=36)
    height = f.top + len(bars) * (bar_h + gap) + f.bottom
    ax = _Axes(_Frame(width, height, f.left, f.right, f.top, f.bottom), 0.0, vmax, 0.0, 1.0, False)
    out = [_svg_open(width, height, title, "stacked-bars")]
    out.append(f'<text class="plot-title" x="8" y="16">{esc(title)}</text>')
    for i, s in enumerate(seg_names):
        lx = 8 + (i % 4) * ((width - 16) // 4)
        ly = 30 + (i // 4) * 18
        out.append(f'<rect x="{lx}" y="{ly - 9}" width="12" height="12" fill="{colour[s]}"/>')
        out.append(f'<text class="legend" x="{lx + 16}" y="{ly + 1}">{esc(_clip(s, 28))}</text>')
    plot_bottom = f.top + len(bars) * (bar_h + gap)
    for t in ticks:
        x = ax.px(t)
        out.append(f'<line class="grid" x1="{x:.1f}" x2="{x:.1f}" y1="{f.top - 4}" y2="{plot_bottom}"/>')
        out.append(
            f'<text class="tick" x="{x:.1f}" y="{plot_bottom + 14}" text-anchor="middle">{esc(fmt_num(t))}</text>'
        )
    out.append(
        f'<text class="axis-label" x="{f.left + ax.f.pw / 2:.1f}" y="{height - 6}" text-anchor="middle">'
        f"{esc(unit)}</text>"
    )
    for i, ((label, segs), total) in enumerate(zip(bars, totals, strict=True)):
        out += _bar(ax, f.top + i * (bar_h + gap), bar_h, label, segs, total, unit, colour)
    out.append("</svg>")
    return "".join(out)


def _bar(
    ax: _Axes,
    y: float,
    bar_h: int,
    label: str,
    segs: Sequence[tuple[str, float]],
    total: float,
    unit: str,
    colour: dict[str, str],
) -> list[str]:
    """One stacked bar at height y: its label, a rect per segment (with its tooltip), its total."""
    left = ax.f.left
    out = [f'<g class="bar" data-label="{esc(label)}">']
    out.append(
        f'<text class="bar-label" x="{left - 6}" y="{y + bar_h / 2 + 4:.1f}" text-anchor="end">'
        f"{esc(_clip(label, 30))}</text>"
    )
    x = float(left)
    for s, v in segs:
        w = ax.px(v) - left if _finite(v) and v > 0 else 0.0
        shown = f"{fmt_num(v)} {unit}" if _finite(v) else "-"
        out.append(
            f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{colour[s]}">'
            f"<title>{esc(label)}: {esc(s)} {esc(shown)}</title></rect>"
        )
        x += w
    out.append(
        f'<text class="bar-total" x="{x + 4:.1f}" y="{y + bar_h / 2 + 4:.1f}">'
        f"{esc(fmt_num(total))} {esc(unit)}</text></g>"
    )
    return out


@dataclass(frozen=True)
class Cell:
    status: str
    tooltip: str
    label: str = ""


def heatmap(
    rows: Sequence[str],
    cols: Sequence[str],
    cells: dict[tuple[str, str], Cell],
    title: str,
    cell_w: int = 46,
    cell_h: int = 24,
) -> str:
    """rows x cols grid coloured by status; a cell with no case is drawn grey and labelled 'no case'."""
    if not rows or not cols:
        return f'<p class="empty">{esc(title)}: nothing to plot.</p>'
    row_w = min(200, 16 + 7 * max(len(r) for r in rows))
    col_h = min(240, 16 + 6 * max(len(c) for c in cols))
    left, top = row_w, 24 + col_h
    statuses = sorted(
        {c.status for c in cells.values()}, key=lambda s: list(STATUS_COLOURS).index(s) if s in STATUS_COLOURS else 99
    )
    legend_h = 24
    width = max(left + len(cols) * cell_w + 16, 360, 24 + 8 * len(title))
    height = top + len(rows) * cell_h + legend_h + 16
    out = [_svg_open(width, height, title, "heatmap")]
    out.append(f'<text class="plot-title" x="8" y="16">{esc(title)}</text>')
    for j, c in enumerate(cols):
        x = left + j * cell_w + cell_w / 2
        out.append(
            f'<text class="col-label" transform="translate({x + 4:.1f} {top - 6}) rotate(-60)">'
            f"{esc(_clip(c, 34))}<title>{esc(c)}</title></text>"
        )
    for i, r in enumerate(rows):
        y = top + i * cell_h
        out.append(
            f'<text class="row-label" x="{left - 6}" y="{y + cell_h / 2 + 4:.1f}" text-anchor="end">'
            f"{esc(_clip(r, 26))}<title>{esc(r)}</title></text>"
        )
        for j, c in enumerate(cols):
            out += _heat_cell(left + j * cell_w, y, (cell_w, cell_h), (r, c), cells.get((r, c)))
    ly = top + len(rows) * cell_h + 18
    lx = 8
    for s in statuses:
        out.append(f'<rect x="{lx}" y="{ly - 10}" width="12" height="12" fill="{status_colour(s)}"/>')
        out.append(f'<text class="legend" x="{lx + 16}" y="{ly}">{esc(s)}</text>')
        lx += 24 + 7 * len(s)
    out.append("</svg>")
    return "".join(out)


def _clip(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def _heat_cell(x: int, y: int, size: tuple[int, int], rc: tuple[str, str], cell: Cell | None) -> list[str]:
    """One heatmap cell: grey 'no case', or coloured by its status with its tooltip and label."""
    (cell_w, cell_h), (r, c) = size, rc
    if cell is None:
        return [
            f'<rect class="cell none" x="{x + 1}" y="{y + 1}" width="{cell_w - 2}" height="{cell_h - 2}"'
            f' fill="{NO_CASE_COLOUR}"><title>{esc(r)} | {esc(c)}: no case</title></rect>'
        ]
    fill = status_colour(cell.status)
    out = [
        f'<g class="cell" data-status="{esc(cell.status)}"><rect x="{x + 1}" y="{y + 1}"'
        f' width="{cell_w - 2}" height="{cell_h - 2}" fill="{fill}">'
        f"<title>{esc(cell.tooltip)}</title></rect>"
    ]
    if cell.label:
        out.append(
            f'<text class="cell-label" x="{x + cell_w / 2:.1f}" y="{y + cell_h / 2 + 4:.1f}"'
            f' text-anchor="middle" style="fill: {text_on(fill)}">'
            f"{esc(_clip(cell.label, 6))}</text>"
        )
    out.append("</g>")
    return out


def _frame_and_labels(f: _Frame, height: int, xlabel: str, ylabel: str, log_y: bool) -> list[str]:
    """The plot frame and its axis labels (the y label only when given; ' (log)' on a log axis)."""
    out = [
        f'<rect class="frame" x="{f.left}" y="{f.top}" width="{f.pw}" height="{f.ph}" fill="none"/>',
        f'<text class="axis-label" x="{f.left + f.pw / 2:.1f}" y="{height - 6}" text-anchor="middle">'
        f"{esc(xlabel)}</text>",
    ]
    if ylabel:
        cy = f.top + f.ph / 2
        out.append(
            f'<text class="axis-label" transform="translate(14 {cy:.1f}) rotate(-90)" text-anchor="middle">'
            f"{esc(ylabel + (' (log)' if log_y else ''))}</text>"
        )
    return out
