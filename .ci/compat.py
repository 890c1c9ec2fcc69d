#!/usr/bin/env python3
"""`make test-compat`: bringup on the torch releases pyproject.toml declares, each in a fresh venv.

  oldest  the floor of `torch>=X` in pyproject.toml installed first (a user's own torch), then
          `pip install bringup` with no constraint (torch must stay as it was), then the timm extra as
          the README says, with `-c torch==X` (torchvision pins one torch release).
  newest  a plain `pip install .` into an empty venv: whatever torch pip picks by itself (on Linux
          that is a CUDA build; on a machine with no GPU this is the "CUDA build, no GPU" case, where
          `auto` must be cpu, `devices` must exit 0 and `smoke` must pass).

Each env runs, from its own work folder, with the default device (`auto`):
  devices   `bringup devices --json`: exit 0; a build with an accelerator compiled in and none
            available must say "built in, no device" and resolve auto to cpu
  smoke     `bringup smoke`: exit 0 (every case pass), on the device auto picked
  zoo       one quick zoo model (HF llama, 2 steps, eager + inductor, parity vs float64)
  train     qwen3-tiny, eager + compile, 2 steps, batch 1 x 32 tokens
  port      `bringup port --fix` on the CUDA training-script fixture (3 manual findings remain), then
            the ported script trains to the end on this torch
  timm      (newest, installed without the extra) `zoo --source timm` ends in one line naming the extra

Prints one table (env, torch, build, each step's status and seconds) and exits 1 if anything failed.
Environment: COMPAT_ENVS="oldest newest" (a subset to run), PY (the python that makes the venvs).
Logs: .venv-compat-<env>/work/<step>.log. Both envs install the wheel built once from this tree
(.venv-compat-wheel/), as `pip install .` would build it; installs run side by side, checks one by one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PORT_FIXTURE = ROOT / "tests" / "port" / "fixtures" / "train" / "train_cuda.py"
STEPS = ("install", "devices", "smoke", "zoo", "train", "port", "timm")


@dataclass
class Step:
    ok: bool | None = None  # None: not run (an earlier failure or not part of this env)
    seconds: float = 0.0
    note: str = ""


@dataclass
class EnvResult:
    name: str
    torch: str = "?"
    build: str = "?"
    auto: str = "?"
    steps: dict[str, Step] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(s.ok is not False for s in self.steps.values()) and self.steps.get("install", Step()).ok is True


def declared_floor() -> str:
    text = (ROOT / "pyproject.toml").read_text()
    m = re.search(r'"torch>=([0-9][0-9.]*)[",<]', text)
    if not m:
        sys.exit("compat: pyproject.toml declares no torch>=X floor")
    return m.group(1)


def release(version: str) -> tuple[int, ...]:
    """'2.7.0+cu126' -> (2, 7); '2.7' -> (2, 7): compare releases the way pip's == does."""
    parts = [int(x) for x in re.findall(r"\d+", version.split("+")[0])[:3]]
    while parts and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def run(
    cmd: list[str], log: Path, cwd: Path, env: dict[str, str] | None = None, timeout: float = 900
) -> tuple[int, str]:
    """Run cmd, output to log (appended); (exit code, output)."""
    with log.open("a") as f:
        f.write(f"$ {' '.join(cmd)}\n")
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
        out, rc = p.stdout + p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        out, rc = f"{e}\n", 124
    with log.open("a") as f:
        f.write(out + f"[exit {rc}]\n")
    return rc, out


class EnvRun:
    def __init__(self, name: str, py: str, wheel: Path) -> None:
        self.name = name
        self.wheel = wheel  # bringup, built once from this tree (what `pip install .` would build)
        self.venv = ROOT / f".venv-compat-{name}"
        self.work = self.venv / "work"
        self.py = py
        self.res = EnvResult(name)
        self.env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
        self.env["PATH"] = f"{self.venv / 'bin'}{os.pathsep}{self.env.get('PATH', '')}"
        self.env["BRINGUP_DB"] = str(self.work / "bringup.db")

    def bin(self, name: str) -> str:
        return str(self.venv / "bin" / name)

    def step(self, name: str, fn) -> bool:  # type: ignore[no-untyped-def]
        log = self.work / f"{name}.log"
        t0 = time.perf_counter()
        try:
            ok, note = fn(log)
        except Exception as e:  # the job's own failure still lands in the table
            ok, note = False, f"{type(e).__name__}: {e}"
        s = Step(ok, time.perf_counter() - t0, note)
        self.res.steps[name] = s
        mark = "pass" if ok else "FAIL"
        print(f"  [{self.name}] {name}: {mark} ({s.seconds:.0f} s){' - ' + note if note else ''}", flush=True)
        if not ok:
            tail = log.read_text()[-3000:] if log.exists() else ""
            print("    " + tail.replace("\n", "\n    "), flush=True)
        return ok

    def bringup(self, args: list[str], log: Path, timeout: float = 900) -> tuple[int, str]:
        return run([self.bin("bringup"), *args], log, self.work, self.env, timeout)

    # ---- install -------------------------------------------------------------------------------------
    def install(self, log: Path) -> tuple[bool, str]:
        shutil.rmtree(self.venv, ignore_errors=True)
        self.work.mkdir(parents=True)
        pip = [self.bin("python"), "-m", "pip", "install", "-q"]
        steps: list[list[str]] = [[self.py, "-m", "venv", str(self.venv)]]
        if self.name == "oldest":
            floor = declared_floor()
            (self.venv / "constraints.txt").write_text(f"torch=={floor}\n")
            # torch first (the user's own), then bringup with no constraint: its dependencies must leave
            # that torch alone; then the timm extra the way the README says (torch pinned with -c).
            con = str(self.venv / "constraints.txt")
            steps += [[*pip, f"torch=={floor}"], [*pip, str(self.wheel)], [*pip, "-c", con, f"{self.wheel}[timm]"]]
        else:
            steps += [[*pip, str(self.wheel)]]
        for i, cmd in enumerate(steps):
            rc, _ = run(cmd, log, ROOT, self.env, timeout=1800)
            if rc != 0:
                return False, f"{cmd[3:] or cmd} exited {rc}"
            if self.name == "oldest" and i == 2:  # bringup installed next to the user's torch, no constraint
                ver = [self.bin("python"), "-c", "import torch; print(torch.__version__)"]
                _, out = run(ver, log, self.work, self.env)
                if release(out.strip()) != release(declared_floor()):
                    return False, f"pip install bringup replaced torch {declared_floor()} with {out.strip()}"
        rc, out = run(
            [
                self.bin("python"),
                "-c",
                "import torch, bringup, sys; print('TORCH', torch.__version__); print('FROM', bringup.__file__)",
            ],
            log,
            self.work,
            self.env,
        )
        m = re.search(r"^TORCH (\S+)", out, re.M)
        if rc != 0 or not m:
            return False, "import torch, bringup failed"
        self.res.torch = m.group(1)
        if str(ROOT / "bringup") in out:
            return False, "bringup imported from the source tree, not the installed package"
        if self.name == "oldest" and release(self.res.torch) != release(declared_floor()):
            return False, f"torch {self.res.torch} is not the declared floor {declared_floor()}"
        return True, ""

    # ---- bringup commands ----------------------------------------------------------------------------
    def devices(self, log: Path) -> tuple[bool, str]:
        rc, out = self.bringup(["devices", "--json", "devices.json"], log)
        if rc != 0:
            return False, f"exit {rc}"
        info = json.loads((self.work / "devices.json").read_text())
        self.res.build, self.res.auto = info["torch_build"], info["auto"]
        built, avail = info["accelerators_built_in"], info["accelerators_available"]
        if built and not avail:  # compiled in, no device: the case a plain pip install makes on a GPU-less box
            if info["auto"] != "cpu":
                return False, f"auto = {info['auto']} with {built} built in and none available"
            if "built in, no device" not in out:
                return False, "devices does not say 'built in, no device'"
            return True, f"{', '.join(built)} built in, no device; auto = cpu"
        return True, f"auto = {info['auto']} ({info['auto_reason']})"

    def smoke(self, log: Path) -> tuple[bool, str]:
        rc, _ = self.bringup(["smoke", "--json", "smoke.json"], log)
        data = json.loads((self.work / "smoke.json").read_text()) if (self.work / "smoke.json").exists() else {}
        note = f"on {data.get('device', '?')}: {data.get('summary', {})}"
        return rc == 0 and data.get("device") == self.res.auto, note

    def zoo(self, log: Path) -> tuple[bool, str]:
        rc, _ = self.bringup(["zoo", "--filter", "^llama$", "--limit", "1", "--steps", "2", "--json", "zoo.json"], log)
        data = json.loads((self.work / "zoo.json").read_text()) if (self.work / "zoo.json").exists() else {}
        return rc == 0, f"llama: {data.get('summary', {})}"

    def train(self, log: Path) -> tuple[bool, str]:
        args = [
            "train",
            "--model",
            "qwen3-tiny",
            "--modes",
            "eager,compile",
            "--steps",
            "2",
            "--warmup",
            "1",
            "--batch",
            "1",
            "--seq",
            "32",
            "--json",
            "train.json",
        ]
        rc, _ = self.bringup(args, log)
        data = json.loads((self.work / "train.json").read_text()) if (self.work / "train.json").exists() else {}
        return rc == 0, f"{data.get('summary', {})}"

    def port(self, log: Path) -> tuple[bool, str]:
        proj = self.work / "port"
        shutil.rmtree(proj, ignore_errors=True)
        proj.mkdir()
        script = proj / PORT_FIXTURE.name
        shutil.copy(PORT_FIXTURE, script)
        rc, _ = self.bringup(["port", "port", "--fix", "--json", "port.json"], log)
        data = json.loads((self.work / "port.json").read_text()) if (self.work / "port.json").exists() else {}
        manual = sorted({f["code"] for f in data.get("findings", [])})
        if rc != 1 or manual != ["BU113", "BU114", "BU130"]:
            return False, f"port --fix: exit {rc}, left {manual} (expected exit 1, BU113 BU114 BU130)"
        rc, out = run([self.bin("python"), str(script), "--steps", "2"], log, proj, self.env)
        if rc != 0 or "TRAINING DONE" not in out:
            return False, f"the ported script exited {rc}"
        return True, f"fixed {data.get('summary', {}).get('fixed')}, ported script trains"

    def timm_hint(self, log: Path) -> tuple[bool, str]:
        rc, out = self.bringup(["zoo", "--source", "timm"], log)
        lines = [ln for ln in out.splitlines() if ln.strip()]
        ok = rc == 2 and len(lines) == 1 and "pip install 'bringup[timm]'" in lines[0]
        return ok, lines[0] if lines else f"exit {rc}, no output"

    def prepare(self) -> bool:
        t0 = time.perf_counter()
        ok = self.step("install", self.install)
        self.res.seconds += time.perf_counter() - t0
        return ok

    def check(self) -> EnvResult:
        t0 = time.perf_counter()
        if self.res.steps["install"].ok:
            for name, fn in (
                ("devices", self.devices),
                ("smoke", self.smoke),
                ("zoo", self.zoo),
                ("train", self.train),
                ("port", self.port),
            ):
                self.step(name, fn)
            if self.name == "newest":
                self.step("timm", self.timm_hint)
        self.res.seconds += time.perf_counter() - t0
        return self.res


def build_wheel(py: str) -> Path:
    out = ROOT / ".venv-compat-wheel"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    rc, text = run([py, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(ROOT)], out / "wheel.log", ROOT)
    wheels = list(out.glob("bringup-*.whl"))
    if rc != 0 or len(wheels) != 1:
        sys.exit(f"compat: building the bringup wheel failed (exit {rc}):\n{text[-3000:]}")
    return wheels[0]


def table(results: list[EnvResult]) -> str:
    head = ["env", "torch", "build", "auto", *STEPS, "wall"]
    rows = [head]
    for r in results:
        cells = [r.name, r.torch, r.build, r.auto]
        for s in STEPS:
            st = r.steps.get(s)
            cells.append("-" if st is None or st.ok is None else f"{'pass' if st.ok else 'FAIL'} {st.seconds:.0f}s")
        cells.append(f"{r.seconds / 60:.1f} min")
        rows.append(cells)
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = [" | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def main() -> int:
    py = os.environ.get("PY", sys.executable)
    names = os.environ.get("COMPAT_ENVS", "oldest newest").split()
    bad = [n for n in names if n not in ("oldest", "newest")]
    if bad:
        sys.exit(f"compat: unknown env(s) {bad}: use oldest, newest")
    t0 = time.perf_counter()
    wheel = build_wheel(py)
    envs = [EnvRun(n, py, wheel) for n in names]
    # Installs are mostly download and unpacking (one core each): side by side. The checks compile and
    # time things: one env at a time.
    with ThreadPoolExecutor(len(envs)) as pool:
        list(pool.map(EnvRun.prepare, envs))
    results = [e.check() for e in envs]
    print(f"\ncompat: torch>={declared_floor()} declared in pyproject.toml; {(time.perf_counter() - t0) / 60:.1f} min")
    print(table(results))
    failed = [r.name for r in results if not r.ok]
    print(f"compat: {'FAILED in ' + ', '.join(failed) if failed else 'every step passed'} ({len(results)} env(s))")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
