"""Workers forked from a pristine copy of the CLI, not started from scratch.

Every worker used to be a fresh `python -m bringup.runner.worker` that spends ~3 s of CPU importing
torch before it can take a case. The CLI has already paid that import. At the one moment its process is
still pristine (torch imported; no plugin imported, no device touched, no compile, one thread), it forks a
*launcher*: a small single-threaded process that only waits for requests and forks a worker for each.
The worker is then the same process `python -m bringup.runner.worker` would have been, minus the
interpreter's start-up: its own session (a budget kill takes its group), its stdin, log and message pipe,
the environment the driver asked for, plugins imported and the device resolved in the worker itself.

What a fork cannot give is started as before (a `subprocess.Popen`): a call from a library user (only the
command-line entry point forks a launcher), a process that is not pristine, an environment that differs
from the launcher's in anything read at interpreter or torch start-up (only the variables in
`_APPLIED`/`_SAFE_PREFIXES` are applied in the child), a launcher that died or did not answer.
`BRINGUP_WORKER_FORK=0` turns it off. Each worker's log says which way it was started.

The driver sees a `ForkedProcess`, which answers what the driver asks of a `subprocess.Popen` (pid, stdin,
poll, wait, returncode with -N for signal N): the launcher reaps the worker and sends its exit status down
a pipe of that worker's own.
"""

from __future__ import annotations

import atexit
import json
import os
import random
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from typing import IO, Any, NoReturn

# Read lazily, after the fork, by bringup, its libraries or the worker itself: applied in the child.
_SAFE_PREFIXES = ("BRINGUP_", "HF_", "HUGGINGFACE_", "TRANSFORMERS_", "TORCHINDUCTOR_", "TRITON_")
# Applied in the child by hand: thread counts (torch.set_num_threads), TMPDIR (tempfile's cached
# choice is reset), PYTHONUNBUFFERED (the child's streams are line-buffered and the worker flushes).
_APPLIED = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "TMPDIR", "PYTHONUNBUFFERED")
# Modules whose import starts threads, initialises a runtime or caches process state: a process that
# has imported one of them is not pristine and forks no launcher.
_NOT_PRISTINE = ("torch._dynamo", "torch._inductor", "transformers", "timm", "triton", "ray", "torch_xla")
_REPLY_TIMEOUT_S = 60.0


# ---- the launcher process ---------------------------------------------------------------------------
def reopen_stdio(stdin_fd: int, out_fd: int, err_fd: int) -> None:
    """In a forked child: these fds become 0, 1, 2 and sys.stdin/stdout/stderr new streams on them."""
    os.dup2(stdin_fd, 0)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    sys.stdin = open(0, closefd=False)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)


def exit_as_interpreter(main: Callable[[], int | None]) -> NoReturn:
    """In a forked child: run main and end as the interpreter would after it (SystemExit's code, other threads
    joined, atexit run, streams flushed), with the exit code it would have; a traceback and 1 on an error."""
    rc = 1
    try:
        try:
            rc = int(main() or 0)
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if not isinstance(e.code, int) and e.code is not None:
                print(e.code, file=sys.stderr)
        threading._shutdown()  # type: ignore[attr-defined]  # CPython's private exit hook, absent from the stubs
        atexit._run_exitfuncs()
    except BaseException:
        traceback.print_exc()
        rc = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(rc)


def _become_worker(req: dict[str, Any], fds: list[int], launcher_fds: set[int]) -> NoReturn:
    """In the forked child: become `python -m bringup.runner.worker ARGS`, then exit with its code."""

    def worker_main() -> int:
        stdin_r, log_fd, msg_fd, status_fd = fds
        os.setsid()
        _write(status_fd, f"pid {os.getpid()}\n")  # only now: a budget kill of its group can no longer miss it
        os.close(status_fd)
        reopen_stdio(stdin_r, log_fd, log_fd)
        os.dup2(msg_fd, 3)
        for fd in {stdin_r, log_fd, msg_fd} | launcher_fds:
            if fd not in (0, 1, 2, 3):
                os.close(fd)
        for sig in (signal.SIGTERM, signal.SIGCHLD, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        tempfile.tempdir = None  # chosen again from this environment's TMPDIR
        random.seed()  # every fork would otherwise share the launcher's sequence
        if "numpy.random" in sys.modules:
            sys.modules["numpy.random"].seed()
        threads = req["env"].get("OMP_NUM_THREADS")
        if threads and threads.isdigit() and int(threads) > 0:
            import torch

            torch.set_num_threads(int(threads))
        print(f"=== worker forked by the launcher (pid {os.getppid()}), not started from scratch", flush=True)
        from bringup.runner import worker  # lazy: imported after the fork, under the worker's own environment

        sys.argv = [worker.__file__, *req["args"]]
        return worker.main(["--fd", "3", "--parent-pid", str(os.getppid()), *req["args"]])

    exit_as_interpreter(worker_main)


def _serve(sock: socket.socket, parent: int) -> None:
    """The launcher's loop: fork a worker per request (which tells its pid down its own status pipe) and,
    once reaped, tell its exit code down the same pipe. Ends when the driver does, taking the workers still
    running with it."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # the driver decides; Ctrl-C in a terminal reaches us too
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)  # the CLI's stdout is the user's: never held open by us
    os.close(devnull)
    status: dict[int, int] = {}  # worker pid -> the write end of its status pipe
    requests = FdRequests(sock, 4)
    while os.getppid() == parent:
        ready, _, _ = select.select([sock], [], [], 0.1)
        if ready:
            got = requests.read()
            if got is None:
                break
            for i, (req, fds) in enumerate(got):
                pid = os.fork()
                if pid == 0:
                    later = [fd for _, f in got[i + 1 :] for fd in f]
                    _become_worker(req, fds, {sock.fileno(), *status.values(), *later, *requests.pending})
                for fd in fds[:3]:
                    os.close(fd)
                status[pid] = fds[3]  # the worker writes its pid here once it leads its session; we, its exit code
        while status:
            try:
                pid, st = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            done_fd = status.pop(pid, None)
            if done_fd is not None:
                _write(done_fd, f"rc {os.waitstatus_to_exitcode(st)}\n")
                os.close(done_fd)
    for pid in status:  # the driver is gone: its workers go with it
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass


class FdRequests:
    """JSON-line requests on a unix socket, each with `nfds` file descriptors that arrive with its first bytes."""

    def __init__(self, sock: socket.socket, nfds: int) -> None:
        self.sock = sock
        self.nfds = nfds
        self._buf = b""
        self.pending: list[int] = []  # fds received for requests not yet complete

    def read(self) -> list[tuple[dict[str, Any], list[int]]] | None:
        """The requests one receive completes (call when the socket is readable); None once the peer is gone."""
        try:
            msg, got, _, _ = socket.recv_fds(self.sock, 1 << 20, 2 * self.nfds)
        except OSError:
            return None
        if not msg:
            return None
        self._buf += msg
        self.pending += got
        out = []
        while b"\n" in self._buf and len(self.pending) >= self.nfds:
            line, _, self._buf = self._buf.partition(b"\n")
            out.append((json.loads(line), self.pending[: self.nfds]))
            self.pending = self.pending[self.nfds :]
        return out


def _write(fd: int, text: str) -> None:
    try:
        os.write(fd, text.encode())
    except OSError:
        pass  # the driver closed its end: nobody to tell


# ---- the driver's side ----------------------------------------------------------------------------------
class ForkedProcess:
    """A worker forked by the launcher, seen as a `subprocess.Popen`: pid, stdin, poll(), wait(), returncode.
    Its exit status comes down its own status pipe; if the launcher dies first, the worker's group is
    killed and it reads as killed by SIGKILL."""

    def __init__(self, pid: int, stdin: IO[bytes], status_fd: int, args: list[str], buf: bytes = b"") -> None:
        self.pid = pid
        self.stdin: IO[bytes] | None = stdin
        self.args = args
        self.returncode: int | None = None
        self._status = status_fd
        self._buf = buf  # what came down the status pipe after the pid
        self._lock = threading.Lock()

    def _read(self, timeout: float | None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while True:
                for line in self._buf.split(b"\n")[:-1]:
                    if line.startswith(b"rc "):
                        self.returncode = int(line[3:])
                self._buf = self._buf.rpartition(b"\n")[2]
                if self.returncode is not None:
                    break
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                if not select.select([self._status], [], [], left)[0]:
                    return
                chunk = os.read(self._status, 256)
                if not chunk:  # the launcher died before reaping it
                    try:
                        os.killpg(self.pid, signal.SIGKILL)
                    except OSError:
                        pass
                    self.returncode = -signal.SIGKILL
                    break
                self._buf += chunk
            if self.returncode is not None and self._status >= 0:
                os.close(self._status)
                self._status = -1

    def poll(self) -> int | None:
        self._read(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        self._read(timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self.returncode


class Launcher:
    def __init__(self, pid: int, sock: socket.socket, env: dict[str, str]) -> None:
        self.pid = pid
        self.sock = sock
        self.env = env
        self.ok = True
        self._lock = threading.Lock()

    def refusal(self, env: dict[str, str]) -> str | None:
        """Why a worker with this environment cannot be forked, or None."""
        if not self.ok:
            return "the launcher is gone"
        differ = {k for k in self.env.keys() | env.keys() if self.env.get(k) != env.get(k)}
        unsafe = sorted(k for k in differ if k not in _APPLIED and not k.startswith(_SAFE_PREFIXES))
        return "environment differs in " + ", ".join(unsafe) if unsafe else None

    def start(self, args: list[str], env: dict[str, str], log_fd: int, msg_w: int) -> ForkedProcess | None:
        """Fork a worker `python -m bringup.runner.worker ARGS` (without --fd/--parent-pid: the launcher adds
        them) writing its log to log_fd and its messages to msg_w. None if the launcher cannot (the caller
        starts a process instead)."""
        stdin_r, stdin_w = os.pipe()
        status_r, status_w = os.pipe()
        req = {"args": args, "env": env, "cwd": os.getcwd()}
        try:
            with self._lock:  # one request's bytes and fds at a time (the pool's slots start workers at once)
                socket.send_fds(self.sock, [(json.dumps(req) + "\n").encode()], [stdin_r, log_fd, msg_w, status_w])
            pid, rest = _read_pid(status_r)
        except OSError:
            pid, rest = None, b""
        finally:
            os.close(stdin_r)
            os.close(status_w)
        if pid is None:
            self.ok = False
            os.close(stdin_w)
            os.close(status_r)
            return None
        return ForkedProcess(pid, os.fdopen(stdin_w, "wb"), status_r, args, rest)

    def close(self) -> None:
        """At the CLI's exit: the launcher sees its socket close, ends (taking any worker still running with it)
        and is reaped here, so no exited launcher is left to whoever inherits it."""
        self.ok = False
        try:
            self.sock.close()
        except OSError:
            pass
        deadline = time.monotonic() + 5
        try:
            while os.waitpid(self.pid, os.WNOHANG)[0] == 0:
                if time.monotonic() > deadline:
                    os.kill(self.pid, signal.SIGKILL)
                    os.waitpid(self.pid, 0)
                    break
                time.sleep(0.01)
        except OSError:
            pass


def _read_pid(fd: int) -> tuple[int | None, bytes]:
    """The worker's pid (None if none came in time) and whatever came after it (its exit code, if it was quick)."""
    deadline = time.monotonic() + _REPLY_TIMEOUT_S
    buf = b""
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None, b""
        chunk = os.read(fd, 64)
        if not chunk:
            return None, b""
        buf += chunk
    line, _, rest = buf.partition(b"\n")
    return (int(line[4:]) if line.startswith(b"pid ") else None), rest


_launcher: Launcher | None = None


def pristine() -> str | None:
    """Why this process must not fork a launcher now, or None."""
    bad = [m for m in _NOT_PRISTINE if m in sys.modules]
    if bad:
        return "imported " + ", ".join(bad)
    if threading.active_count() != 1:
        return f"{threading.active_count()} threads"
    return None


def prefork() -> None:
    """At the CLI's pristine moment: import torch and fork the launcher (once; a no-op where it cannot)."""
    global _launcher
    if _launcher is not None or os.environ.get("BRINGUP_WORKER_FORK", "1") == "0":
        return
    if sys.platform != "linux" or not hasattr(socket, "send_fds"):
        return
    import torch  # noqa: F401  # the point: the workers get it imported

    if pristine() is not None:
        return
    ours, theirs = socket.socketpair()
    parent = os.getpid()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            ours.close()
            _serve(theirs, parent)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    theirs.close()
    _launcher = Launcher(pid, ours, dict(os.environ))

    atexit.register(_launcher.close)


def launcher() -> Launcher | None:
    return _launcher
