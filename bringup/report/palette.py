"""The status colours of the scorecard (badges, heatmap cells) and WCAG 2 contrast.

One palette feeds the badges' CSS (`status_css`) and the heatmap's cells (bringup.report.plots), and the
text on each colour is chosen by contrast (`text_on`): whichever of white and the page's dark text
reads better. WCAG AA asks 4.5:1 for normal text (badges are 12 px, cell labels 10 px: normal text);
tests/report/test_palette.py checks every colour here, and the browser test checks what the browser
actually rendered, both themes.
"""

from __future__ import annotations

# Hues kept from before (green pass, red numeric failure, amber gaps, purple budget ...), darkened where
# white text on them was under 4.5:1 (pass was 3.5:1, fail_numeric 4.4:1, budget 4.0:1).
STATUS_COLOURS: dict[str, str] = {
    "pass": "#1e7e34",
    "fail_numeric": "#c0392b",
    "fail_compile": "#b5179e",
    "budget": "#7453c9",
    "unsupported": "#e0a526",
    "fallback": "#f0c75e",
    "silent_eager": "#e07b26",
    "crash": "#8b1e1e",
    "oom": "#5a3d8a",
    "ref_fail": "#9aa0a6",
    "error": "#444444",
}
OTHER_STATUS = "#444444"  # a status this version does not know (a newer bundle)
LIGHT_TEXT = "#ffffff"
DARK_TEXT = "#1d2125"  # the page's text colour in the light theme
AA_NORMAL = 4.5  # WCAG 2.x SC 1.4.3, text under 18.66 px bold / 24 px


def _channel(c: float) -> float:
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def rgb(colour: str) -> tuple[float, float, float]:
    """'#rgb' / '#rrggbb' -> (r, g, b) in 0..1."""
    h = colour.strip().lstrip("#")
    if len(h) == 3:
        h = "".join(c * 2 for c in h)
    if len(h) != 6:
        raise ValueError(f"not a hex colour: {colour!r}")
    r, g, b = (int(h[i : i + 2], 16) / 255 for i in (0, 2, 4))
    return r, g, b


def luminance(colour: str | tuple[float, float, float]) -> float:
    """WCAG relative luminance (sRGB)."""
    r, g, b = rgb(colour) if isinstance(colour, str) else colour
    return 0.2126 * _channel(r) + 0.7152 * _channel(g) + 0.0722 * _channel(b)


def contrast(a: str | tuple[float, float, float], b: str | tuple[float, float, float]) -> float:
    """WCAG contrast ratio, 1..21."""
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def text_on(fill: str) -> str:
    """The text colour for a label on `fill`: white or the page's dark text, whichever contrasts more."""
    return LIGHT_TEXT if contrast(LIGHT_TEXT, fill) >= contrast(DARK_TEXT, fill) else DARK_TEXT


def status_colour(status: str) -> str:
    return STATUS_COLOURS.get(status, OTHER_STATUS)


def status_css() -> str:
    """The badges' rules (`.st-<status>`), from the palette: background and the text colour it needs."""
    rules = [f".st {{ background: {OTHER_STATUS}; color: {text_on(OTHER_STATUS)}; }}"]
    rules += [f".st-{s} {{ background: {c}; color: {text_on(c)}; }}" for s, c in STATUS_COLOURS.items()]
    return "\n".join(rules) + "\n"
