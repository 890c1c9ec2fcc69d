"""From the options to a `BisectSpec`, before any work: the target (a repro script, or a case found in a
stored run), the candidates, and how every env is made. Every mistake a user can make ends here as
BadInput (one line, exit 2) with nothing stored.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import shutil
import site
import subprocess
import sys
import tempfile
from pathlib import Path

import bringup
from bringup.bisect import candidates
from bringup.bisect.args import BisectOptions
from bringup.bisect.spec import BisectSpec, Settings, Target, file_sha256, normalize
from bringup.errors import BadInput
from bringup.files import check_output_dir, check_output_path
from bringup.store import Store

WHEEL_BUILD_TIMEOUT_S = 900.0
_TREE_SUFFIXES = (".py", ".cpp", ".h", ".html", ".css", ".js", ".json", ".yaml", ".toml")


def build_spec(opts: BisectOptions, db: Path) -> BisectSpec:
    check_output_path(opts.json, "--json")
    cache = check_output_dir(opts.env_cache_dir(), "--env-cache")
    target = resolve_target(opts, db)
    if opts.new_signature and target.kind != "repro":
        raise BadInput("--new-signature needs a repro script TARGET (what it prints or raises is its signature)")
    cands, source = candidates.resolve(opts.between, opts.wheels, opts.sets, opts.sets_file, opts.pre)
    with_reqs = tuple(normalize(r, "--with") for r in opts.with_reqs)
    inherit = inherit_dirs() if opts.inherit_site else ()
    deps: tuple[str, ...] = ()
    wheel = ""
    if target.kind == "case" and not opts.inherit_site:
        deps = bringup_requirements()
        wheel = bringup_wheel(Path(str(cache)))
    settings = Settings(
        repeat=opts.repeat,
        build_budget_s=opts.build_budget,
        run_budget_s=opts.run_budget,
        env_cache=str(cache),
        env_cache_max_gb=opts.env_cache_max_gb,
        inherit_site=inherit,
        fail_status=opts.fail_status,
        with_reqs=with_reqs,
        bringup_deps=deps,
        bringup_wheel=wheel,
        new_signature=opts.new_signature or "",
    )
    return BisectSpec(
        tuple(cands),
        target,
        settings,
        every=opts.every,
        max_envs=opts.max_envs,
        compiler_bisect=opts.compiler_bisect,
        localize=opts.localize,
        source=source,
        followup_budget_s=opts.followup_budget,
        new_verdict=opts.new_verdict,  # checked where the options were built (args.check_new_verdict)
    )


def resolve_target(opts: BisectOptions, db: Path) -> Target:
    text = opts.target
    if not text:
        raise BadInput("bisect: give a TARGET: a repro script, or a stored case (its id or suite/name)")
    path = Path(text).expanduser()
    if text.endswith(".py") or path.exists():
        if not path.is_file():
            raise BadInput(f"bisect: repro {text}: no such file")
        return Target(
            "repro",
            str(path.resolve()),
            file_sha256(path),
            device=opts.target_device or "cpu",
            imports=opts.target_import or (),
        )

    if not db.exists():
        raise BadInput(f"bisect: {text} is not a file, and there is no result database at {db} to find a case in")
    with Store(db, create=False) as st:
        runs = [st.get_run(opts.from_run)] if opts.from_run else list(reversed(st.runs()))
        for run in runs:
            found = [c for c in st.planned(run.run_id) if text in (c.case_id, f"{c.suite}/{c.name}")]
            if len(found) > 1:
                raise BadInput(
                    f"bisect: {len(found)} cases named {text!r} in run {run.run_id}: give its case id "
                    f"({', '.join(c.case_id for c in found[:4])})"
                )
            if found:
                case = found[0]
                if case.suite == "bisect":
                    raise BadInput(f"bisect: {text} is a bisection's own case; give the case it bisected")
                imports = opts.target_import if opts.target_import is not None else run.info.get("imports", [])
                data = {**case.to_json(), "case_id": case.case_id}
                return Target(
                    "case",
                    case=data,
                    from_run=run.run_id,
                    device=opts.target_device or run.device,
                    imports=tuple(imports),
                )
    where = f"run {opts.from_run}" if opts.from_run else f"any run in {db}"
    raise BadInput(f"bisect: {text!r} is neither a file nor a case id or suite/name in {where}")


def inherit_dirs() -> tuple[str, ...]:
    """This Python's site directories (and bringup's source root when it is not installed in one): what
    each env sees, under its own packages, with --inherit-site."""
    dirs = [d for d in site.getsitepackages() if Path(d).is_dir()]
    user = site.getusersitepackages()
    if site.ENABLE_USER_SITE and Path(user).is_dir():
        dirs.append(user)
    root = str(Path(bringup.__file__).resolve().parents[1])
    if not any(root.startswith(d) for d in dirs):
        dirs.append(root)
    return tuple(dirs)


def bringup_requirements() -> tuple[str, ...]:
    """bringup's own dependencies (no extras): what each env of a stored case needs beside the candidate."""
    try:
        reqs = importlib.metadata.requires("bringup") or []
    except importlib.metadata.PackageNotFoundError:
        raise BadInput("bisect: bringup's metadata is not installed (pip install it, or use --inherit-site)") from None
    return tuple(sorted(normalize(r) for r in reqs if "extra ==" not in r and "extra==" not in r))


def source_root() -> Path:
    root = Path(bringup.__file__).resolve().parents[1]
    if not (root / "pyproject.toml").is_file():
        raise BadInput(
            "bisect: a stored case runs through bringup in each env, and this bringup is not a source "
            "tree to build its wheel from: use --inherit-site"
        )
    return root


def tree_digest(root: Path) -> str:
    h = hashlib.sha256()
    for f in sorted([root / "pyproject.toml", *(root / "bringup").rglob("*")]):
        if f.is_file() and f.suffix in _TREE_SUFFIXES and "__pycache__" not in f.parts:
            h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def bringup_wheel(cache: Path) -> str:
    """The wheel of this tree (built once per tree content, kept in the env cache): each env of a stored
    case gets it last, --no-deps."""
    root = source_root()
    out = cache / "bringup-wheels" / tree_digest(root)
    have = sorted(out.glob("bringup-*.whl")) if out.is_dir() else []
    if have:
        return str(have[0])
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=".build-"))
    cmd = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(tmp), str(root)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=WHEEL_BUILD_TIMEOUT_S)
        wheels = list(tmp.glob("bringup-*.whl"))
        if p.returncode != 0 or len(wheels) != 1:
            last = [ln for ln in (p.stdout + p.stderr).splitlines() if ln.strip()]
            raise BadInput(f"bisect: building bringup's wheel failed: {last[-1] if last else p.returncode}")
        try:
            tmp.rename(out)
        except OSError:  # another bisection built it meanwhile
            pass
    except subprocess.TimeoutExpired:
        raise BadInput(f"bisect: building bringup's wheel took over {WHEEL_BUILD_TIMEOUT_S:g} s") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return str(sorted(out.glob("bringup-*.whl"))[0])
