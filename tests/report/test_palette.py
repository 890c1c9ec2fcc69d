"""The status palette reads at WCAG AA (4.5:1) with the text colour chosen for it, and the contrast
arithmetic is right (known pairs) and can fail (the old white-on-amber badge)."""

from __future__ import annotations

import pytest

from bringup.case import Status
from bringup.report.palette import AA_NORMAL, STATUS_COLOURS, contrast, status_css, text_on


def test_known_contrast_ratios() -> None:
    assert contrast("#000000", "#ffffff") == pytest.approx(21.0)
    assert contrast("#ffffff", "#ffffff") == pytest.approx(1.0)
    assert contrast("#777777", "#ffffff") == pytest.approx(4.48, abs=0.01)  # the classic just-fails grey
    assert contrast("#fff", "#000") == contrast("#000000", "#ffffff")


def test_every_status_colour_has_a_readable_label() -> None:
    assert set(STATUS_COLOURS) == {s.value for s in Status}
    for status, fill in STATUS_COLOURS.items():
        assert contrast(text_on(fill), fill) >= AA_NORMAL, (status, fill, text_on(fill))
        assert f".st-{status} {{ background: {fill}; color: {text_on(fill)}; }}" in status_css()


def test_the_check_fails_on_the_old_badges() -> None:
    # issue 29: white glyphs on amber (2.2:1) and green (3.5:1)
    assert contrast("#ffffff", "#e0a526") < AA_NORMAL
    assert contrast("#ffffff", "#2e9d4b") < AA_NORMAL
    assert text_on("#e0a526") != "#ffffff"  # the chooser picks the dark text there
