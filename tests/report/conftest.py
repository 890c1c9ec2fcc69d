"""Fixture stores for the report tests: a run with realistic results for every suite, built through the
real Store (no device work), plus a headless-Chromium helper speaking CDP over --remote-debugging-pipe."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bringup.case import CaseResult, Metric, Status, make_case_id
from bringup.store import Store

XSS = "<script>alert(1)</script>"


def _case(suite: str, name: str, status: Status, params: dict[str, Any], **kw: Any) -> CaseResult:
    metrics = {k: (v if isinstance(v, Metric) else Metric(float(v[0]), v[1])) for k, v in kw.pop("metrics", {}).items()}
    return CaseResult(
        case_id=make_case_id(suite, params), suite=suite, name=name, status=status, params=params, metrics=metrics, **kw
    )


def fixture_results(regress: bool = False, trace_path: str = "/tmp/trace.json.gz") -> list[CaseResult]:
    """One realistic run: smoke, probe, train (3 modes x cold/warm), flex (a 2x2x... matrix with budget
    failures at batch 4 / seq 8192), zoo (pass, graph breaks, fallback, fail_numeric with an XSS-laden
    error, ref_fail), ops, profile. `regress=True` plants regressions for `compare`: a zoo model goes
    pass -> fail_numeric, compiled tokens/s drops 40%, regional TTFS doubles, a smoke error grows 100x."""
    out: list[CaseResult] = []
    # smoke
    out.append(
        _case(
            "smoke",
            "gemm",
            Status.PASS,
            {"kind": "gemm", "n": 256, "dtype": "fp32"},
            metrics={"max_abs_err": (2e-5 * (100 if regress else 1), ""), "max_rel_err": (1e-6, "")},
            wall_s=0.4,
        )
    )
    out.append(
        _case(
            "smoke",
            "mlp_step",
            Status.PASS,
            {"kind": "mlp_step", "dtype": "fp32"},
            metrics={"max_abs_err": (3e-7, ""), "max_rel_err": (4e-7, "")},
            wall_s=0.6,
        )
    )
    # probe
    for feat, st, reason in [
        ("bf16", Status.PASS, ""),
        ("fp16", Status.PASS, ""),
        ("fp8_e4m3", Status.UNSUPPORTED, "NotImplementedError: \"mm\" not implemented for 'Float8_e4m3fn'"),
        ("scaled_mm", Status.UNSUPPORTED, "RuntimeError: _scaled_mm is only supported on CUDA & ROCm"),
        ("autocast", Status.PASS, ""),
        ("sdpa", Status.PASS, ""),
        ("compile", Status.PASS, ""),
        ("distributed", Status.PASS, "gloo"),
        ("torchao", Status.ERROR, "ModuleNotFoundError: No module named 'torchao'"),
    ]:
        out.append(_case("probe", feat, st, {"feature": feat}, reason=reason, wall_s=0.1))
    # train
    steady = {"eager": 0.21, "compile": 0.20, "regional": 0.205}
    ttfs = {
        ("eager", ""): 0.9,
        ("compile", "cold"): 21.7,
        ("compile", "warm"): 3.0,
        ("regional", "cold"): 7.7,
        ("regional", "warm"): 2.1,
    }
    for (mode, cache), t in ttfs.items():
        step = steady[mode]
        tps = 4 * 256 / step
        if regress and mode == "compile":
            tps *= 0.6
        if regress and mode == "regional" and cache == "cold":
            t *= 2
        m: dict[str, Any] = {
            "ttfs_s": (t, "s"),
            "step_s": (step, "s"),
            "first_over_steady": (t / step, "x"),
            "tokens_per_s": (tps, "tok/s"),
            "tokens_per_s_per_device": (tps, "tok/s"),
            "mfu": (0.0123, ""),
            "peak_mem_bytes": (1.5e9, "B"),
            "graph_breaks": (0, ""),
            "recompiles": (0, ""),
        }
        if mode != "eager":
            m |= {
                "compile_dynamo_s": (t * 0.3, "s"),
                "compile_aot_s": (t * 0.2, "s"),
                "compile_inductor_s": (t * 0.35, "s"),
            }
        params = {"mode": mode, "cache": cache or "cold", "model": "qwen3-tiny", "steps": 8}
        loss = [(i, 11.0 - 0.3 * i + (0.001 if mode != "eager" else 0.0)) for i in range(8)]
        out.append(
            _case(
                "train",
                f"{mode}/{cache}" if cache else mode,
                Status.PASS,
                params,
                metrics=m,
                series={"loss": loss},
                fields={"mode": mode, "cache": cache or "cold"},
                wall_s=t + 2,
            )
        )
    # flex: 3 mods x batch {1,4} x seq {1024, 8192}; budget at batch 4 seq 8192 for two mods
    for mod in ("noop", "causal", "sliding_window"):
        for b in (1, 4):
            for s in (1024, 8192):
                p = {
                    "mod": mod,
                    "batch": b,
                    "seq": s,
                    "q_heads": 16,
                    "kv_heads": 2,
                    "head_dim": 128,
                    "dtype": "bf16",
                    "backward": False,
                }
                if b == 4 and s == 8192 and mod != "noop":
                    out.append(
                        _case(
                            "flex",
                            f"{mod}/b{b}/s{s}",
                            Status.BUDGET,
                            p,
                            reason="compile exceeded its budget of 600 s",
                            wall_s=600,
                        )
                    )
                else:
                    out.append(
                        _case(
                            "flex",
                            f"{mod}/b{b}/s{s}",
                            Status.PASS,
                            p,
                            wall_s=3,
                            metrics={
                                "compile_s": (2.5, "s"),
                                "fwd_ms": (1.2 * b * s / 1024, "ms"),
                                "tflops": (0.4, "TFLOP/s"),
                                "sparsity": (0.5 if mod != "noop" else 0, ""),
                                "max_abs_err": (3e-3, ""),
                            },
                        )
                    )
    # zoo
    zoo_rows = [
        (
            "llama",
            Status.PASS,
            {"baseline_check": {"status": "ok"}},
            {"params": 1.2e6, "max_rel_err": 1e-6, "loss_divergence": 1e-7, "compile_s": 11},
            "",
            "",
        ),
        (
            "gpt2",
            Status.FAIL_NUMERIC if regress else Status.PASS,
            {},
            {"params": 9e5, "max_rel_err": 0.2 if regress else 2e-6, "compile_s": 9},
            "logits max rel err 0.2 > 1e-4" if regress else "",
            "",
        ),
        (
            "qwen3",
            Status.PASS,
            {"break_reasons": ["Tensor.item() call", "print() builtin"]},
            {"params": 1.5e6, "graph_breaks": 2, "max_rel_err": 3e-6, "compile_s": 14},
            "",
            "",
        ),
        (
            "mamba",
            Status.FALLBACK,
            {"fallback_ops": {"aten::_fft_r2c": 3}},
            {"params": 2e6, "compile_s": 20},
            "ran only through the CPU fallback: aten::_fft_r2c",
            "",
        ),
        (
            "evil<model>",
            Status.FAIL_NUMERIC,
            {},
            {"params": 1e6, "max_rel_err": 0.05},
            f"grad max rel err 0.05 {XSS}",
            f'Traceback (most recent call last):\n  File "x.py", line 1\nValueError: bad {XSS} & "quotes"',
        ),
        ("bark", Status.REF_FAIL, {}, {}, "config", "TypeError: cannot build config"),
        ("resnet18", Status.PASS, {}, {"params": 1.1e7, "max_rel_err": 1e-5, "compile_s": 30}, "", ""),
    ]
    for name, st, fields, mets, reason, err in zoo_rows:
        metrics = {k: (v, "s" if k.endswith("_s") else "") for k, v in mets.items()}
        metrics["peak_mem_bytes"] = (2.5e8, "B")
        out.append(
            _case(
                "zoo",
                name,
                st,
                {"model": name, "source": "hf-causal"},
                fields=dict(fields),
                metrics=metrics,
                reason=reason,
                error=err,
                wall_s=15,
                series={"loss": [(0, 4.6), (1, 4.5), (2, 4.4)]},
            )
        )
    # ops
    for op, dt, st, reason in [
        ("add", "float32", Status.PASS, ""),
        ("add", "bfloat16", Status.PASS, ""),
        ("sin", "float32", Status.FALLBACK, "aten::sin ran via the CPU fallback"),
        ("linalg.svd", "float32", Status.UNSUPPORTED, "NotImplementedError: aten::_linalg_svd"),
        ("mul", "float32", Status.FAIL_NUMERIC, "max abs err 0.1"),
    ]:
        out.append(
            _case(
                "ops",
                f"{op}.{dt}",
                st,
                {"op": op, "dtype": dt},
                fields={"op": op, "dtype": dt},
                reason=reason,
                metrics={"samples": (4, "")},
                wall_s=0.2,
            )
        )
    # profile
    out.append(
        _case(
            "profile",
            "qwen3-tiny/eager",
            Status.PASS,
            {"model": "qwen3-tiny", "mode": "eager", "steps": 3},
            fields={
                "top_ops": [
                    {"name": "aten::mm", "self_s": 0.12, "calls": 96},
                    {"name": "aten::_softmax", "self_s": 0.03, "calls": 12},
                    {"name": "aten::<lambda>", "self_time": 0.001, "calls": 1},
                ],
                "transfers": {
                    "H2D": {"count": 3, "bytes": 4096, "time_s": 0.001},
                    "D2H": {"count": 1, "bytes": 4, "time_s": 0.0001},
                },
                "busy_s": 0.18,
                "idle_s": None,
                "host_s": 0.02,
            },
            artifacts={"trace": trace_path},
            wall_s=5,
        )
    )
    return out


PORT_INFO = {
    "findings": [
        {"file": "train.py", "line": 3, "col": 5, "code": "BU101", "message": ".cuda() call", "fixable": True},
        {
            "file": "evil<x>.py",
            "line": 9,
            "col": 1,
            "code": "BU120",
            "message": f"torch.cuda.Stream {XSS}",
            "fixable": False,
        },
    ],
    "summary": {"files": 2, "findings": 2, "fixable": 1},
}


def build_store(db: Path, regress: bool = False, results: list[CaseResult] | None = None, port: bool = True) -> str:
    """A finished `run` in the store at `db`; returns its run id."""
    with Store(db) as st:
        info: dict[str, Any] = {"imports": [], "options": {"allow_unsupported": False}}
        if port:
            info["port"] = PORT_INFO
        run_id = st.new_run("run", ["run", "--quick"], "cpu", "x86_64 test cpu", info)
        for r in results if results is not None else fixture_results(regress):
            st.record(run_id, r)
        st.end_run(run_id, "finished")
    time.sleep(0.01)  # distinct started_at for latest-run ordering
    return run_id


@pytest.fixture
def fixture_store(tmp_path: Path) -> tuple[Path, str]:
    db = tmp_path / "res" / "bringup.db"
    return db, build_store(db)


# ---- headless Chromium ---------------------------------------------------------------------------------
_LOCK = Path(tempfile.gettempdir()) / "bringup-apt-chromium.lock"


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        p = shutil.which(name)
        if p:
            return p
    return None


def ensure_chromium() -> str:
    """Chromium's path; installs the Debian package once (under a lock shared by concurrent sessions)
    when missing. Skips, with the reason, only where it cannot be installed."""
    found = find_chromium()
    if found:
        return found
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.skip("headless Chromium is not installed and cannot be installed here (needs root and apt-get)")
    with open(_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = find_chromium()
        if not found:
            env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
            p = subprocess.run(
                ["apt-get", "install", "-y", "--no-install-recommends", "chromium"],
                env=env,
                capture_output=True,
                text=True,
                timeout=900,
            )
            if p.returncode != 0:
                subprocess.run(["apt-get", "update"], env=env, capture_output=True, timeout=600)
                p = subprocess.run(
                    ["apt-get", "install", "-y", "--no-install-recommends", "chromium"],
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=900,
                )
            found = find_chromium()
            if not found:
                pytest.skip(f"headless Chromium could not be installed: {p.stderr.strip().splitlines()[-1:]}")
    return found


class CDP:
    """A minimal Chrome DevTools Protocol client over --remote-debugging-pipe (fd 3: to the browser,
    fd 4: from it; NUL-terminated JSON messages). No websocket library, no Playwright downloads."""

    def __init__(self, chromium: str, profile_dir: Path) -> None:
        profile_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = profile_dir / "chromium.log"
        self._log = open(self.log_path, "wb")  # closed in close()
        to_r, self._to_w = os.pipe()
        self._from_r, from_w = os.pipe()

        args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--no-default-browser-check",
            "--remote-debugging-pipe",
            f"--user-data-dir={profile_dir}",
            "--window-size=1400,1000",
            "about:blank",
        ]
        # The pipe ends become fds 3 and 4 of the browser, set up by a tiny Python launcher (the browser is
        # often a wrapper script; subprocess closes every fd not in pass_fds after preexec_fn; dash can't
        # redirect fds above 9). Both are first moved above 10, in case either already is 3 or 4.
        launcher = (
            "import fcntl, os, sys\n"
            "a, b = (fcntl.fcntl(int(x), fcntl.F_DUPFD, 10) for x in sys.argv[1:3])\n"
            "os.dup2(a, 3); os.dup2(b, 4)\n"
            "os.execv(sys.argv[3], sys.argv[3:])\n"
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-c", launcher, str(to_r), str(from_w), chromium, *args],
            pass_fds=(to_r, from_w),
            stdout=subprocess.DEVNULL,
            stderr=self._log,
        )
        os.close(to_r)
        os.close(from_w)
        self._buf = b""
        self._id = 0
        self.events: list[dict[str, Any]] = []

    def send(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None, timeout: float = 60
    ) -> dict[str, Any]:
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_w, json.dumps(msg).encode() + b"\0")
        want = self._id
        deadline = time.monotonic() + timeout
        while True:
            m = self._read(deadline)
            if m.get("id") == want:
                if "error" in m:
                    raise RuntimeError(f"CDP {method}: {m['error']}")
                return dict(m.get("result", {}))
            self.events.append(m)

    def wait_event(self, method: str, timeout: float = 60) -> dict[str, Any]:
        for i, e in enumerate(self.events):
            if e.get("method") == method:
                return self.events.pop(i)
        deadline = time.monotonic() + timeout
        while True:
            m = self._read(deadline)
            if m.get("method") == method:
                return m
            self.events.append(m)

    def _read(self, deadline: float) -> dict[str, Any]:
        import select

        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer from Chromium over the CDP pipe")
            ready, _, _ = select.select([self._from_r], [], [], left)
            if ready:
                chunk = os.read(self._from_r, 1 << 20)
                if not chunk:
                    err = self.log_path.read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"Chromium closed the CDP pipe: {err}")
                self._buf += chunk
        raw, _, self._buf = self._buf.partition(b"\0")
        return dict(json.loads(raw))

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=10)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_w)
        os.close(self._from_r)
        self._log.close()


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Callable[[], CDP]]:
    chromium = ensure_chromium()
    made: list[CDP] = []

    def start() -> CDP:
        c = CDP(chromium, tmp_path / "chromium-profile")
        made.append(c)
        return c

    yield start
    for c in made:
        c.close()


# ---- page checks in the browser (the scorecard's and the history page's browser tests) -----------------
def cdp_eval(cdp: CDP, session: str, expr: str) -> Any:
    res = cdp.send(
        "Runtime.evaluate", {"expression": expr, "returnByValue": True, "awaitPromise": True}, session=session
    )
    if "exceptionDetails" in res:
        raise AssertionError(f"JS error evaluating {expr!r}: {res['exceptionDetails']}")
    return res["result"].get("value")


def cdp_errors(cdp: CDP) -> list[str]:
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


def open_page(cdp: CDP, path: Path, width: int = 1400, height: int = 1000) -> str:
    """A new tab showing `path`, loaded; returns its CDP session id."""
    target = cdp.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = cdp.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    for domain in ("Page", "Runtime", "Log"):
        cdp.send(f"{domain}.enable", session=session)
    cdp.send(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        session=session,
    )
    cdp.send("Page.navigate", {"url": path.resolve().as_uri()}, session=session)
    cdp.wait_event("Page.loadEventFired", timeout=60)
    return session


# WCAG 2 contrast of every piece of text the browser rendered, from computed styles: the text colour
# (its alpha and every ancestor's opacity composited onto the background) against the background it
# sits on (the nearest opaque ancestor background, translucent layers composited); SVG text against the
# status cell it labels (the rect in its group) or the SVG's background. 4.5:1, or 3:1 for large text
# (24 px, or 18.66 px bold). Returns the failures: [{text, fg, bg, ratio, need, where}].
CONTRAST_JS = (Path(__file__).parent / "contrast.js").read_text()


def contrast_failures(cdp: CDP, session: str) -> tuple[int, list[dict[str, Any]]]:
    """(text elements checked, those under WCAG AA) in the current theme."""
    res = cdp_eval(cdp, session, CONTRAST_JS)
    return int(res["checked"]), list(res["bad"])


def set_theme(cdp: CDP, session: str, scheme: str) -> None:
    """Emulate prefers-color-scheme (light | dark): the page's dark theme follows it."""
    cdp.send(
        "Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": scheme}]}, session=session
    )


# ---- a history of stored runs: two machines, two torch versions ------------------------------------------
DAY = 86400.0
HISTORY_T0 = 1795435200.0  # 2026-11-23 12:00 UTC


def _noisy(results: list[CaseResult], rng: Any, scale: float, drop: float, broken: set[str]) -> list[CaseResult]:
    """fixture_results() as one more nightly run: every train figure with 1.5% normal noise, tokens/s and
    MFU of the compiled arms x `drop`, throughputs x `scale` (another machine), zoo models in `broken`
    turned fail_numeric."""
    out = []
    for r in results:
        r = CaseResult.from_json(r.to_json())
        if r.suite == "train":
            compiled = r.params.get("mode") != "eager"
            for k, m in list(r.metrics.items()):
                if k in ("tokens_per_s", "tokens_per_s_per_device", "mfu"):
                    v = m.value * scale * (drop if compiled else 1.0)
                elif k in ("ttfs_s", "step_s", "job_ttfs_s") or k.startswith("compile_"):
                    v = m.value / scale
                else:
                    continue
                r.metrics[k] = Metric(v * (1 + 0.015 * rng.gauss(0, 1)), m.unit)
            r.metrics.setdefault("job_ttfs_s", Metric(r.metrics["ttfs_s"].value + 1.7, "s"))
        if r.suite == "zoo" and r.name in broken:
            r.status, r.reason = Status.FAIL_NUMERIC, "logits: rel_rmse 0.3 > bound 1e-3"
        out.append(r)
    return out


def build_history(tmp: Path) -> dict[str, Any]:
    """Two machines' nightly runs, in two stores:
    - a.db, "cpu" on host ci-cpu: 8 runs a day apart; runs 1-4 torch 2.12.0, runs 5-8 torch 2.13.0, where
      the compiled arms' tokens/s and MFU drop 30% and zoo/llama starts failing (pass rate 4/6 -> 3/6);
    - b.db, "cuda:0" (NVIDIA H100) on host gpu-box: 5 runs on torch 2.13.0, 50x the throughput, noise only.
    Each run records its build (torch commit, bringup commit) as bringup/provenance.py does. Returns the
    paths and the run ids in start order per machine."""
    import random

    rng = random.Random(29)
    base = fixture_results()
    plan = [
        (
            "a",
            "cpu",
            "x86_64 test cpu",
            "ci-cpu",
            HISTORY_T0 + i * DAY,
            "2.12.0" if i < 4 else "2.13.0",
            1.0,
            0.7 if i >= 4 else 1.0,
            {"llama"} if i >= 4 else set(),
        )
        for i in range(8)
    ]
    plan += [
        ("b", "cuda:0", "NVIDIA H100 80GB HBM3", "gpu-box", HISTORY_T0 + (i + 2.5) * DAY, "2.13.0", 50.0, 1.0, set())
        for i in range(5)
    ]
    ids: dict[str, list[str]] = {"a": [], "b": []}
    for store, device, name, host, t, torch_v, scale, drop, broken in plan:
        db = tmp / f"{store}.db"
        with Store(db) as st:
            git = {"2.12.0": "a1b2c3d4e5f60718", "2.13.0": "cf30153c4c131c81"}[torch_v]
            info = {
                "imports": [],
                "options": {"allow_unsupported": False},
                "build": {"torch_git": git, "bringup_git": "16174e88eac3", "python": "3.11.7"},
                "versions": {"transformers": "5.24.0", "timm": "1.0.31"},
                "paths": {"cwd": f"/home/ci/{store}", "home": "/home/ci", "tmp": "/tmp", "python": None},
            }
            run_id = st.new_run(
                "run",
                ["run", "--quick"],
                device,
                name,
                info,
                run_id=f"2026112{len(ids[store])}-{store}{len(ids[store])}",
            )
            for r in _noisy(base, rng, scale, drop, broken):
                st.record(run_id, r)
            st.end_run(run_id, "finished")
            st.conn.execute(
                "UPDATE runs SET started_at = ?, ended_at = ?, torch_version = ?, host = ? WHERE run_id = ?",
                (t, t + 600, torch_v, host, run_id),
            )
        ids[store].append(run_id)
    return {"a": tmp / "a.db", "b": tmp / "b.db", "ids": ids}
