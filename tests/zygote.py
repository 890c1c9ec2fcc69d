"""A pristine, torch-imported interpreter that forks `bringup.cli` processes for the tests (`run_cli`).

Every `python -m bringup.cli` the tests start spends ~3 s of CPU importing torch before it reads its
arguments; `make test` starts some 150 of them (measured with an atexit rusage log of every Python
process: torch imports were ~40% of the suite's CPU). This module keeps one interpreter per test process
that has imported torch and `bringup.cli` and done nothing else (no device touched, no test run in it,
single-threaded), and forks it for each CLI call: the child is a real process of its own (own pid,
session, exit code, stdout/stderr, workers it starts), as `python -m bringup.cli` would be, minus the
interpreter's start-up.

What a fork cannot give, a call falls back to a real subprocess for: an environment that differs from
the zygote's in anything read at start-up (only `BRINGUP_*`, Hugging Face's, inductor's, triton's, Ray's and pip's
variables, this suite's plugins' own (`TRIAGE_*`, `FAKEPLUGIN_*`), `PYTHONWARNINGS` and `PYTHONPATH` entries
without a sitecustomize are applied in the child), a zygote that died, or a call made while another thread's call
is running. `BRINGUP_TEST_FORK=0` turns it off; `BRINGUP_TEST_FORK_LOG=FILE` writes a line per call (forked, or
started and why).
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# Read by their libraries when those are imported, which the zygote never does (checked at its start).
# Inductor writes TORCHINDUCTOR_CACHE_DIR into os.environ at a test process's first compile, ray.init RAY_*.
# PIP_*: read by pip, which bringup only ever runs as a process of its own (`python -m pip`: bisect's envs), never
# imports (the bisect tests' PIP_NO_INDEX started every one of their CLI calls, ~3 s of torch start-up each).
# TRIAGE_*, FAKEPLUGIN_*: this suite's own plugins' knobs, read when they run (tests/triage/lowering_gap.py at each
# lowering, tests/bisect/fakeplugin.py's package in a candidate env), never imported here.
_SAFE_PREFIXES = (
    "BRINGUP_",
    "HF_",
    "HUGGINGFACE_",
    "TRANSFORMERS_",
    "TORCHINDUCTOR_",
    "_TORCHINDUCTOR_",
    "TRITON_",
    "RAY_",
    "PIP_",
    "TRIAGE_",
    "FAKEPLUGIN_",
)
_APPLIED = ("PYTHONWARNINGS", "PYTHONPATH", "PYTEST_CURRENT_TEST")
_NOT_IMPORTED = (
    "huggingface_hub",
    "transformers",
    "torch._inductor",
    "torch._dynamo",
    "timm",
    "triton",
    "ray",
    "pip",
    "lowering_gap",
    "bringup_fakeplugin",
)


# ---- the zygote process ----------------------------------------------------------------------------------
def _child(req: dict[str, Any], out_fd: int, err_fd: int, sock: socket.socket) -> None:
    """In the forked child: become `python -m bringup.cli ARGS` in req's cwd and env, then exit."""
    from bringup.runner.launcher import exit_as_interpreter, reopen_stdio

    def cli_main() -> int:
        sock.close()
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDONLY)
        reopen_stdio(devnull, out_fd, err_fd)
        for fd in (devnull, out_fd, err_fd):
            os.close(fd)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.chdir(req["cwd"])
        env = req["env"]
        os.environ.clear()
        os.environ.update(env)
        extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        rest = [p for p in sys.path[1:] if p not in ("", *extra)]  # [0] is the REPO serve() was found by
        sys.path[:] = [req["cwd"], *extra, *rest]  # as `python -m` puts them: the cwd, PYTHONPATH, the rest
        import importlib
        import warnings

        importlib.invalidate_caches()
        for opt in reversed([w for w in env.get("PYTHONWARNINGS", "").split(",") if w]):
            warnings._processoptions([opt])  # type: ignore[attr-defined]
        sys.argv = [str(REPO / "bringup" / "cli.py"), *req["args"]]
        from bringup.cli import main

        return main()  # argv from sys.argv, as the program (it forks the workers' launcher)

    exit_as_interpreter(cli_main)


def serve(fd: int) -> None:
    """The zygote's loop: fork a child per request; report each child's pid and, when reaped, its exit code."""
    import torch  # noqa: F401  # the point: imported once, here

    import bringup.cli  # noqa: F401
    from bringup.runner.launcher import FdRequests

    sock = socket.socket(fileno=fd)
    bad = [m for m in _NOT_IMPORTED if m in sys.modules]
    threads = threading.active_count()
    _send(sock, {"ready": not bad and threads == 1, "why": f"imported {bad}, {threads} threads"})
    children: set[int] = set()
    parent = os.getppid()
    requests = FdRequests(sock, 2)  # a CLI's stdout and stderr pipe ends
    while os.getppid() == parent:
        ready, _, _ = select.select([sock], [], [], 0.1)
        if ready:
            got = requests.read()
            if got is None:
                break
            for req, pipes in got:
                pid = os.fork()
                if pid == 0:
                    _child(req, pipes[0], pipes[1], sock)
                for f in pipes:
                    os.close(f)
                children.add(pid)
                _send(sock, {"pid": pid})
        for pid in list(children):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                children.discard(pid)
                _send(sock, {"exit": pid, "rc": os.waitstatus_to_exitcode(status)})
    for pid in children:  # the test process is gone: take the CLIs (and their workers' watch) with us
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass


def _send(sock: socket.socket, msg: dict[str, Any]) -> None:
    sock.sendall((json.dumps(msg) + "\n").encode())


# ---- the test side -----------------------------------------------------------------------------------------
_session_env: dict[str, str] | None = None


def session_env() -> dict[str, str]:
    return dict(_session_env if _session_env is not None else os.environ)


def snapshot_env() -> None:
    """The environment the zygote starts with: the session's, taken before any test changes os.environ."""
    global _session_env
    _session_env = dict(os.environ)


class Zygote:
    def __init__(self) -> None:
        self.env = session_env()
        ours, theirs = socket.socketpair()
        code = (
            f"import sys; sys.path.insert(0, {str(REPO)!r}); from tests.zygote import serve; serve({theirs.fileno()})"
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code], cwd=REPO, env=self.env, pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL
        )
        theirs.close()
        self.sock = ours
        self._buf = b""
        self.lock = threading.Lock()
        hello = self._recv(time.monotonic() + 120)
        self.ok = bool(hello and hello.get("ready"))

    def _recv(self, deadline: float) -> dict[str, Any] | None:
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                return None
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                return None
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return json.loads(line)  # type: ignore[no-any-return]

    def refusal(self, env: dict[str, str]) -> str | None:
        """Why this call cannot be forked (the zygote's state, the variables read at start-up that differ, a
        sitecustomize on PYTHONPATH), or None: the one rule, for the decision and for the log alike."""
        if not self.ok or self.proc.poll() is not None:
            return "zygote unusable"
        unsafe = sorted(
            k
            for k in self.env.keys() | env.keys()
            if self.env.get(k) != env.get(k) and k not in _APPLIED and not k.startswith(_SAFE_PREFIXES)
        )
        if unsafe:
            return "env differs: " + ",".join(unsafe)
        extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        if any((Path(p) / name).exists() for p in extra for name in ("sitecustomize.py", "usercustomize.py")):
            return "a sitecustomize on PYTHONPATH"
        return None

    def serves(self, env: dict[str, str]) -> bool:
        return self.refusal(env) is None

    def run(
        self, args: list[str], cwd: Path, env: dict[str, str], timeout: float
    ) -> subprocess.CompletedProcess[str] | None:
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        req = {"args": args, "cwd": str(cwd), "env": env}
        socket.send_fds(self.sock, [(json.dumps(req) + "\n").encode()], [out_w, err_w])
        os.close(out_w)
        os.close(err_w)
        deadline = time.monotonic() + timeout
        reply = self._recv(time.monotonic() + 60)
        if reply is None or "pid" not in reply:  # the zygote died or is out of step: this call is started instead
            self.ok = False
            os.close(out_r)
            os.close(err_r)
            return None
        pid = reply["pid"]
        chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
        open_fds = [out_r, err_r]
        try:
            while open_fds:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise subprocess.TimeoutExpired(args, timeout)
                for fd in select.select(open_fds, [], [], min(left, 1.0))[0]:
                    data = os.read(fd, 1 << 16)
                    if data:
                        chunks[fd].append(data)
                    else:
                        open_fds.remove(fd)
                        os.close(fd)
            while True:
                msg = self._recv(deadline)
                if msg is None:
                    raise subprocess.TimeoutExpired(args, timeout)
                if msg.get("exit") == pid:
                    rc = int(msg["rc"])
                    break
        except BaseException:
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
            for fd in open_fds:
                os.close(fd)
            self.ok = False  # its reply stream is out of step now: later calls start real processes
            raise
        text = {fd: b"".join(c).decode(errors="replace") for fd, c in chunks.items()}
        return subprocess.CompletedProcess([sys.executable, "-m", "bringup.cli", *args], rc, text[out_r], text[err_r])

    def close(self) -> None:
        self.sock.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


_zygote: Zygote | None = None
_start_lock = threading.Lock()


def run(args: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str] | None:
    """The CLI forked from the zygote, or None where it cannot serve this call (the caller starts a process)."""
    global _zygote
    if os.environ.get("BRINGUP_TEST_FORK", "1") == "0" or not hasattr(socket, "send_fds") or sys.platform != "linux":
        return None
    with _start_lock:
        if _zygote is None:
            _zygote = Zygote()
        z = _zygote
    why = z.refusal(env)
    if why is None and not z.lock.acquire(blocking=False):
        why = "another thread's call is running"
    if why is not None:
        _log(f"started ({why}) {args[:4]}")
        return None
    _log(f"forked {args[:4]}")
    try:
        return z.run(args, cwd, env, timeout)
    finally:
        z.lock.release()


def _log(line: str) -> None:
    """BRINGUP_TEST_FORK_LOG=FILE: one line per CLI call, forked or started and why (to count what it saves)."""
    path = os.environ.get("BRINGUP_TEST_FORK_LOG")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


def close() -> None:
    global _zygote
    if _zygote is not None:
        _zygote.close()
        _zygote = None
