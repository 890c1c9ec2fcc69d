"""Discovery and the config-only fetch (hub/fetch.py, hub/index.py) against the local Hub stand-in
(tests/hub/hub_standin.py: the endpoints huggingface_hub calls, HF_ENDPOINT pointed at it) with ~300 synthetic
repos over 26 architectures (tests/hub/hub_synth.py): listing, every failure by its reason, retries, the rate
limit (no 429 where an unlimited fetch gets them), resume after an interrupt, export / import, offline."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, assert_one_line_error, run_main
from tests.hub import hub_synth as hs
from tests.hub.hub_standin import StandIn


@pytest.fixture(scope="module")
def synth() -> hs.SynthHub:
    h = hs.generate()
    h.flaky = {r.id for r in h.repos if r.flaky}  # type: ignore[attr-defined]
    return h


@pytest.fixture
def hub(synth: hs.SynthHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    for r in synth.repos:  # each test starts from the generator's flakiness
        r.flaky = 1 if r.id in synth.flaky else 0  # type: ignore[attr-defined]
    with StandIn(synth.repos, page_size=50) as s:
        monkeypatch.setenv("HF_ENDPOINT", s.url)
        monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        yield s


def _fast() -> Any:
    from bringup.hub import fetch as hf

    return hf.Limiters.of(hf.Limits(100_000, 100_000))


def test_listing_sorted_paginated_filtered(hub: StandIn, synth: hs.SynthHub, tmp_path: Path) -> None:
    from bringup.hub import fetch as hf
    from bringup.hub.index import HubIndex

    with HubIndex(tmp_path / "i.db") as idx:
        every = hf.discover(hf.parse_search("hub-search:", None), idx, _fast())
        public = [r for r in synth.repos if not r.private]
        assert len(every) == len(public) > 250  # 7 pages of 50, private repos not listed
        dl = [e.downloads for e in every]
        assert dl == sorted(dl, reverse=True) and every[0].sha and every[0].downloads == 10_000_000
        top = hf.discover(hf.parse_search("hub-search:sort=likes,task=fill-mask", 5), idx, _fast())
        assert len(top) == 5 and all(e.pipeline_tag == "fill-mask" for e in top)
        assert [e.likes for e in top] == sorted([e.likes for e in top], reverse=True)
        org = hf.discover(hf.parse_search("hub-search:base,author=meta-llama", None), idx, _fast())
        assert {e.model_id.split("/")[0] for e in org} == {"meta-llama"} and len(org) >= 3
        assert all("base" in e.model_id for e in org)
        n = hub.count("api")
        again = hf.discover(hf.parse_search("hub-search:", None), idx, _fast())
        assert [e.model_id for e in again] == [e.model_id for e in every] and hub.count("api") == n  # saved


def test_fetch_classifies_every_repo_and_resumes(hub: StandIn, synth: hs.SynthHub, tmp_path: Path) -> None:
    """Every id ends with its expected status (flaky repos answer 503 first and are fetched); a second run
    asks the Hub nothing; ids fetched before a Ctrl-C are not fetched again after it."""
    from bringup.hub import fetch as hf
    from bringup.hub.index import HubIndex

    listing = tmp_path / "ids.txt"
    listing.write_text("\n".join(f"{r.id} downloads={r.downloads}" for r in synth.repos) + "\n")
    # what the fetch itself sees (a config without model_type or of an unknown type is fetched fine: planning
    # classifies it, test_plan_dedups_by_signature)
    expect = {
        "gated": "gated",
        "private": "not_found_or_private",
        "missing_config": "missing_config",
        "bad_json": "bad_config",
    }
    with HubIndex(tmp_path / "i.db") as idx:
        entries = hf.listed_entries(hf.read_id_list(f"hub-list:{listing}"), idx)
        lim = _fast()
        calls = {"n": 0}
        real = lim.resolve.acquire

        def stop_after(n: int = 1) -> None:  # Ctrl-C in the middle of the fetch
            calls["n"] += 1
            if calls["n"] == 120:
                raise KeyboardInterrupt
            real(n)

        lim.resolve.acquire = stop_after  # type: ignore[method-assign]
        with pytest.raises(KeyboardInterrupt):
            hf.fetch(entries, idx, lim, workers=4, backoff_s=0.01)
        done = {k for k, e in idx.all().items() if e.status != "pending"}
        assert 60 <= len(done) < len(entries)
        before = [x.path for x in hub.log]
        got, stats = hf.fetch(
            hf.listed_entries(hf.read_id_list(f"hub-list:{listing}"), idx), idx, _fast(), workers=8, backoff_s=0.01
        )
        asked_again = {
            p.split("/resolve/")[0].lstrip("/") for p in [x.path for x in hub.log][len(before) :] if "/resolve/" in p
        }
        assert not asked_again & {m for m, _ in done}, "ids fetched before the interrupt were fetched again"
        assert stats.already == len(done) and not stats.interrupted
    by_id = {e.model_id: e for e in got}
    for r in synth.repos:
        e = by_id[r.id]
        want = expect.get(r.kind, "ok")
        assert e.status == want, (r.id, r.kind, e.status, e.reason)
        if want == "ok":
            assert e.config is not None and e.sha == r.sha
    assert hub.count("resolvers", status=503) >= 1  # the flaky ones did answer 503 first
    n = hub.count("resolvers")
    with HubIndex(tmp_path / "i.db") as idx:
        _, stats = hf.fetch(hf.listed_entries(hf.read_id_list(f"hub-list:{listing}"), idx), idx, _fast())
    assert hub.count("resolvers") == n and stats.already == len(synth.repos)  # nothing asked twice


def test_rate_limit_keeps_under_the_hubs(synth: hs.SynthHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stand-in allows 24 /resolve/ calls per 2 s window. Unlimited, a fetch of 30 configs (60 calls) meets
    429s; with a limiter set to that quota (its burst + refill stay under it in any window) it meets none."""
    from bringup.hub import fetch as hf
    from bringup.hub.index import HubIndex

    ok = [r for r in synth.repos if r.kind in ("copy", "base")][:30]
    for r in ok:
        r.flaky = 0
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    for arm, limiter in (("unlimited", hf.RateLimiter(100_000)), ("limited", hf.RateLimiter(24, window_s=2.0))):
        with StandIn(ok, limits={"resolvers": 24}, window_s=2.0) as s:
            monkeypatch.setenv("HF_ENDPOINT", s.url)
            monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / arm / "hf"))
            with HubIndex(tmp_path / arm / "i.db") as idx:
                es = hf.listed_entries([hf.ListedId(r.id) for r in ok], idx)
                lim = hf.Limiters(hf.RateLimiter(100_000), limiter)
                got, _ = hf.fetch(es, idx, lim, workers=8, backoff_s=0.01)
            assert all(e.status == "ok" for e in got), [(e.model_id, e.status, e.reason) for e in got]
            n429 = s.count("resolvers", status=429)
        assert (n429 > 0) if arm == "unlimited" else (n429 == 0), (arm, n429)


def test_rate_limiter_bound_in_any_window() -> None:
    """Token bucket on a fake clock: no window of 300 s ever holds more than the quota."""
    from bringup.hub.fetch import RateLimiter

    t = [0.0]
    stamps: list[float] = []
    lim = RateLimiter(500, clock=lambda: t[0], sleep=lambda s: t.__setitem__(0, t[0] + s))
    for _ in range(2000):
        lim.acquire(2)
        stamps.append(t[0])
    j = 0
    for i, s in enumerate(stamps):
        while stamps[j] <= s - 300.0:
            j += 1
        assert 2 * (i - j + 1) <= 500
    assert stamps[-1] > 300 * (2 * 2000 / 500 - 1)  # and it does not crawl: about the quota's pace


def test_export_import_and_offline_planning(
    hub: StandIn, synth: hs.SynthHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fetched where the Hub is reachable, exported as one file, imported on a machine without it: the same
    plan, with HF_HUB_OFFLINE set and the Hub gone."""
    from bringup.hub import fetch as hf
    from bringup.hub import plan as hub_plan
    from bringup.hub.index import HubIndex

    q = hf.parse_search("hub-search:", None)
    with HubIndex(tmp_path / "online.db") as idx:
        got, _ = hf.fetch(hf.discover(q, idx, _fast()), idx, _fast(), backoff_s=0.01)
        n = idx.export(tmp_path / "configs.jsonl.gz")
    assert n == len(got)
    plan = hub_plan.plan_ids(got)
    hub.stop()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    with HubIndex(tmp_path / "offline.db") as idx:
        assert idx.import_(tmp_path / "configs.jsonl.gz") == n
        off, stats = hf.fetch(hf.discover(q, idx, _fast()), idx, _fast())
    assert stats.already == len(off) and not stats.fetched
    plan2 = hub_plan.plan_ids(off)
    assert [r["signature"] for r in plan.rows] == [r["signature"] for r in plan2.rows]
    assert len(plan.sigs) >= 60 and {r["config_status"] for r in plan.rows} >= {
        "ok",
        "gated",
        "missing_config",
        "bad_config",
        "custom_code",
        "unknown_model_type",
    }
    with HubIndex(tmp_path / "other.db") as idx:  # a listing never made, offline: one clear error
        from bringup.errors import BadInput

        with pytest.raises(BadInput, match="HF_HUB_OFFLINE"):
            hf.discover(hf.parse_search("hub-search:llama", None), idx, _fast())


def test_plan_dedups_by_signature(synth: hs.SynthHub) -> None:
    """Planning alone (no network): copies and resized variants join their base's signature, near-duplicates
    get their own, failures are counted by reason; the most downloaded signature comes first."""
    from bringup.hub import plan as hub_plan
    from bringup.hub.index import Entry

    entries = []
    for r in synth.repos:
        raw = r.files.get("config.json")
        try:
            cfg = None if raw is None else __import__("json").loads(raw)
        except ValueError:
            cfg = None
        status = (
            "gated"
            if r.gated
            else "not_found_or_private"
            if r.private
            else "missing_config"
            if raw is None
            else "bad_config"
            if cfg is None
            else "ok"
        )
        entries.append(Entry(r.id, "", r.sha, status, "", r.downloads, r.likes, config=cfg))
    plan = hub_plan.plan_ids(entries)
    sig = {row["model_id"]: row["signature"] for row in plan.rows}
    groups: dict[str, set[Any]] = {}
    for r in synth.repos:
        groups.setdefault(r.expect, set()).add(sig[r.id])
    for g, sigs in groups.items():
        if g.startswith("sig:") and g.count(":") == 1:
            assert len(sigs) == 1 and None not in sigs, g
    for g, sigs in groups.items():
        if g.count(":") == 2:
            base = groups[":".join(g.split(":")[:2])]
            assert not sigs & base, g
    reasons = {row["model_id"]: row["config_status"] for row in plan.rows}
    for r in synth.repos:
        if not r.expect.startswith("sig"):
            assert reasons[r.id] == r.expect, (r.id, reasons[r.id])
    archs = {plan.sigs[s].architecture for s in plan.sigs}
    assert len(archs) >= 20 and len(plan.sigs) < len(synth.repos) / 3
    order = plan.order()
    assert plan.downloads(order[0]) == max(plan.downloads(s) for s in order)


def test_bad_search_and_list_inputs(tmp_path: Path) -> None:
    from bringup.errors import BadInput
    from bringup.hub import fetch as hf
    from bringup.hub import flags as hub_flags

    for bad in ("hub-search:a,b", "hub-search:sort=trending", "hub-search:colour=red", "hub-search:task="):
        with pytest.raises(BadInput):
            hf.parse_search(bad, None)
    f = tmp_path / "ids.txt"
    for text in ("not an id\n", "a/b/c\n", "org/x downloads=lots\n", "# only a comment\n"):
        f.write_text(text)
        with pytest.raises(BadInput):
            hf.read_id_list(f"hub-list:{f}")
    with pytest.raises(BadInput):
        hf.read_id_list(f"hub-list:{tmp_path / 'missing.txt'}")
    for bad in ("", "1", "a,b", "0,10", "10,1"):
        if bad:
            with pytest.raises(BadInput):
                hub_flags.parse_limits(bad)
    f.write_text("org/a@v1.0 downloads=5 likes=2\norg/a@v1.0\nhub:org/b\n")
    ids = hf.read_id_list(f"hub-list:{f}")
    assert [(i.model_id, i.revision, i.downloads) for i in ids] == [("org/a", "v1.0", 5), ("org/b", "", None)]


def test_interrupted_cli_fetch_continues(
    synth: hs.SynthHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`bringup hub fetch`, stopped with Ctrl-C (SIGINT) mid-fetch, exits 130 saying how to continue; the
    same command again fetches only the rest and ends with every id settled. A bad --hub-rate (refused before
    any fetch) is checked in process (run_main)."""
    ok = [r for r in synth.repos if r.kind in ("copy", "base")][:40]
    for r in ok:
        r.flaky = 0
    listing = tmp_path / "ids.txt"
    listing.write_text("\n".join(r.id for r in ok) + "\n")
    with StandIn(ok, delay_s=0.1) as s:
        env = {
            **os.environ,
            "HF_ENDPOINT": s.url,
            "HF_HUB_CACHE": str(tmp_path / "hf"),
            "PYTHONWARNINGS": "ignore",
            "PYTHONPATH": str(REPO),
        }
        env.pop("HF_HUB_OFFLINE", None)
        cmd = [
            sys.executable,
            "-m",
            "bringup.cli",
            "--db",
            str(tmp_path / "b.db"),
            "hub",
            "fetch",
            "--source",
            f"hub-list:{listing}",
            "--hub-workers",
            "2",
            "--hub-rate",
            "1000,100000",
        ]
        # SIGINT back to its default in the child: a parent that ignores it (a test runner's worker may) would
        # hand the child SIG_IGN, and Python then installs no KeyboardInterrupt handler (Ctrl-C never arrives).
        p = subprocess.Popen(
            cmd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        deadline = time.monotonic() + 120
        while s.count("resolvers", status=200) < 10 and time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.05)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
        assert p.returncode == 130, (p.returncode, out[-2000:], err[-2000:])
        assert "run the same command again to continue" in err and "Traceback" not in err
        first = s.count("resolvers", status=200)
        q = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        assert q.returncode == 0, q.stderr[-2000:]
        assert "ok 40" in q.stdout, q.stdout
        assert s.count("resolvers", status=200) - first < 2 * len(ok) - 4  # the first run's configs not again
        assert_one_line_error(run_main([*cmd[3:-2], "--hub-rate", "lots"], capsys), "--hub-rate")
        plan = [*cmd[:6], "plan", *cmd[7:], "--json", str(tmp_path / "plan.json")]
        q = subprocess.run(plan, env=env, capture_output=True, text=True, timeout=300)
        assert q.returncode == 0 and "40 id(s) -> " in q.stdout, (q.stdout, q.stderr[-2000:])
        got = json.loads((tmp_path / "plan.json").read_text())
        assert len(got["ids"]) == 40 and sum(v["ids"] for v in got["signatures"].values()) == 40
