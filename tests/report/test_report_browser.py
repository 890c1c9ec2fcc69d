"""The scorecard in a real browser: headless Chromium over the DevTools protocol (a pipe, no network).

No console errors or uncaught exceptions; every key section renders with a size; the zoo table sorts
and filters; every text the browser rendered reads at WCAG AA in both themes (computed styles); every
link is relative; a screenshot is saved as an artifact (its path is printed)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from bringup.report import html
from bringup.store import Store
from tests.report.conftest import cdp_errors, cdp_eval, contrast_failures, open_page, set_theme

SECTIONS = ("verdict", "smoke", "probe", "train", "flex", "zoo", "ops", "profile", "port", "failures")


_eval = cdp_eval
_errors = cdp_errors


@pytest.mark.browser
def test_report_in_headless_chromium(fixture_store, browser, tmp_path: Path) -> None:
    db, run_id = fixture_store
    with Store(db) as st:
        page = html.write_report(st, run_id, tmp_path / "report.html")
    cdp = browser()
    session = open_page(cdp, page)

    assert _eval(cdp, session, "document.documentElement.getAttribute('data-ready')") == "1", "report JS did not run"
    sizes = _eval(
        cdp,
        session,
        f"JSON.stringify(Object.fromEntries({json.dumps(SECTIONS)}.map(s => {{ const e = document.getElementById("
        "'sec-' + s); return [s, e ? e.getBoundingClientRect().height : -1]; })))",
    )
    sizes = json.loads(sizes)
    for s in SECTIONS:
        assert sizes[s] > 20, (s, sizes)
    assert _eval(cdp, session, "document.querySelectorAll('svg.plot').length") >= 4
    assert _eval(cdp, session, "document.getElementById('flex-line').textContent") == (
        "10/12 passed; 2 budget (all batch 4, seq 8192)"
    )
    # nothing executed from the data: the planted <script>alert(1)</script> is text
    assert _eval(cdp, session, "document.body.innerText.includes('<script>alert(1)</script>')") is True
    assert _eval(cdp, session, "JSON.parse(document.getElementById('bringup-data').textContent).run_id") == run_id

    visible = "Array.from(document.querySelectorAll('#tbl-zoo tbody tr')).filter(r => !r.hidden).length"
    assert _eval(cdp, session, visible) == 7
    assert _eval(cdp, session, "document.querySelector('form[data-table=tbl-zoo] .shown').textContent") == (
        "showing 7 of 7"
    )
    _eval(
        cdp,
        session,
        "(() => { const s = document.querySelector('form[data-table=tbl-zoo] select[name=status]');"
        " s.value = 'fail_numeric'; s.dispatchEvent(new Event('change', {bubbles: true})); })()",
    )
    assert _eval(cdp, session, visible) == 1
    _eval(
        cdp,
        session,
        "(() => { const s = document.querySelector('form[data-table=tbl-zoo] select[name=status]');"
        " s.value = ''; s.dispatchEvent(new Event('change', {bubbles: true}));"
        " const c = document.querySelector('form[data-table=tbl-zoo] input[name=gb]');"
        " c.checked = true; c.dispatchEvent(new Event('change', {bubbles: true})); })()",
    )
    assert _eval(cdp, session, visible) == 1  # only qwen3 has graph breaks
    _eval(
        cdp,
        session,
        "(() => { const c = document.querySelector('form[data-table=tbl-zoo] input[name=gb]');"
        " c.checked = false; c.dispatchEvent(new Event('change', {bubbles: true})); })()",
    )
    # sort by params (numeric, ascending then descending)
    order = "Array.from(document.querySelectorAll('#tbl-zoo tbody tr')).map(r => r.cells[0].textContent)"
    _eval(
        cdp,
        session,
        "Array.from(document.querySelectorAll('#tbl-zoo th')).find(t => t.textContent === 'params').click()",
    )
    assert _eval(cdp, session, order)[:3] == ["gpt2", "evil<model>", "llama"]
    _eval(
        cdp,
        session,
        "Array.from(document.querySelectorAll('#tbl-zoo th')).find(t => t.textContent === 'params').click()",
    )
    assert _eval(cdp, session, order)[0] == "resnet18"

    # WCAG AA for every text the browser rendered, light and dark; badges and heatmap labels included
    for scheme in ("light", "dark"):
        set_theme(cdp, session, scheme)
        body_bg = _eval(cdp, session, "getComputedStyle(document.body).backgroundColor")
        assert body_bg == {"light": "rgb(255, 255, 255)", "dark": "rgb(21, 24, 28)"}[scheme]
        checked, bad = contrast_failures(cdp, session)
        assert checked > 200 and bad == [], (scheme, bad[:10])
    set_theme(cdp, session, "light")
    hrefs = _eval(cdp, session, "Array.from(document.querySelectorAll('a[href]')).map(a => a.getAttribute('href'))")
    assert hrefs and all(h.startswith("#") or not (h.startswith("/") or ":" in h) for h in hrefs), hrefs

    height = min(int(_eval(cdp, session, "document.documentElement.scrollHeight")), 8000)
    cdp.send(
        "Emulation.setDeviceMetricsOverride",
        {"width": 1400, "height": height, "deviceScaleFactor": 1, "mobile": False},
        session=session,
    )
    shot = cdp.send("Page.captureScreenshot", {"format": "png"}, session=session, timeout=120)
    png = tmp_path / "report-screenshot.png"
    png.write_bytes(base64.b64decode(shot["data"]))
    print(f"\nscreenshot: {png}")
    assert png.stat().st_size > 10_000 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert _errors(cdp) == []


@pytest.mark.browser
def test_browser_check_sees_console_errors(browser, tmp_path: Path) -> None:
    """The check above can fail: a page that throws and logs an error is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text(
        "<!DOCTYPE html><html><body><script>console.error('boom');throw new Error('uncaught');</script></body></html>"
    )
    cdp = browser()
    open_page(cdp, bad)
    errs = _errors(cdp)
    assert any("boom" in e for e in errs) and any("uncaught" in e for e in errs), errs


@pytest.mark.browser
def test_browser_contrast_check_fails_on_low_contrast(browser, tmp_path: Path) -> None:
    """The contrast check can fail: the old badges (white on amber 2.2:1, on green 3.5:1), grey text
    faded by an ancestor's opacity, and a label on a light SVG cell are all caught; large text gets 3:1."""
    bad = tmp_path / "contrast.html"
    bad.write_text(
        "<!DOCTYPE html><html><body style='background:#fff'>"
        "<span style='color:#fff;background:#e0a526'>unsupported</span>"
        "<span style='color:#fff;background:#2e9d4b'>pass</span>"
        "<div style='opacity:.5'><span style='color:#5f6b76'>faded</span></div>"
        "<p style='color:#767676'>fine at 4.54</p>"
        "<h1 style='color:#949494;font-size:24px'>large at 3.03</h1>"
        "<svg width='60' height='30'><g><rect width='60' height='30' style='fill:#f0c75e'/>"
        "<text x='5' y='20' style='fill:#fff'>cell</text></g></svg></body></html>"
    )
    cdp = browser()
    session = open_page(cdp, bad)
    checked, failures = contrast_failures(cdp, session)
    assert checked == 6
    assert sorted(f["text"] for f in failures) == ["cell", "faded", "pass", "unsupported"], failures
    amber = next(f for f in failures if f["text"] == "unsupported")
    assert 2.0 < amber["ratio"] < 2.3
