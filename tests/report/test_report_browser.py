"""The scorecard in a real browser: headless Chromium over the DevTools protocol (a pipe, no network).

No console errors or uncaught exceptions; every key section renders with a size; the zoo table sorts
and filters; a screenshot is saved as an artifact (its path is printed)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from bringup.report import html
from bringup.store import Store
from tests.report.conftest import CDP

SECTIONS = ("verdict", "smoke", "probe", "train", "flex", "zoo", "ops", "profile", "port", "failures")


def _eval(cdp: CDP, session: str, expr: str) -> Any:
    res = cdp.send("Runtime.evaluate", {"expression": expr, "returnByValue": True, "awaitPromise": True},
                   session=session)  # fmt: skip
    if "exceptionDetails" in res:
        raise AssertionError(f"JS error evaluating {expr!r}: {res['exceptionDetails']}")
    return res["result"].get("value")


def _errors(cdp: CDP) -> list[str]:
    out = []
    for e in cdp.events:
        m, p = e.get("method"), e.get("params", {})
        if m == "Runtime.exceptionThrown":  # its text and message first: the url before them grows with the tmp path
            d = p.get("exceptionDetails", {})
            out.append(f"{d.get('text', '')} {d.get('exception', {}).get('description', '')} {json.dumps(d)}"[:500])
        elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            out.append(json.dumps(p.get("args", []))[:500])
        elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            out.append(json.dumps(p["entry"])[:500])
    return out


@pytest.mark.browser
def test_report_in_headless_chromium(fixture_store, browser, tmp_path: Path) -> None:
    db, run_id = fixture_store
    with Store(db) as st:
        page = html.write_report(st, run_id, tmp_path / "report.html")
    cdp = browser()
    target = cdp.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = cdp.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    for domain in ("Page", "Runtime", "Log"):
        cdp.send(f"{domain}.enable", session=session)
    cdp.send("Emulation.setDeviceMetricsOverride", {"width": 1400, "height": 1000, "deviceScaleFactor": 1,
                                                    "mobile": False}, session=session)  # fmt: skip
    cdp.send("Page.navigate", {"url": page.resolve().as_uri()}, session=session)
    cdp.wait_event("Page.loadEventFired", timeout=60)

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

    height = min(int(_eval(cdp, session, "document.documentElement.scrollHeight")), 8000)
    cdp.send("Emulation.setDeviceMetricsOverride", {"width": 1400, "height": height, "deviceScaleFactor": 1,
                                                    "mobile": False}, session=session)  # fmt: skip
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
    bad.write_text("<!DOCTYPE html><html><body><script>console.error('boom');"
                   "throw new Error('uncaught');</script></body></html>")  # fmt: skip
    cdp = browser()
    target = cdp.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = cdp.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    for domain in ("Page", "Runtime", "Log"):
        cdp.send(f"{domain}.enable", session=session)
    cdp.send("Page.navigate", {"url": bad.as_uri()}, session=session)
    cdp.wait_event("Page.loadEventFired", timeout=60)
    errs = _errors(cdp)
    assert any("boom" in e for e in errs) and any("uncaught" in e for e in errs), errs
