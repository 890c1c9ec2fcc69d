"""A range that holds more than two verdicts, as the MQA repro's does across torch releases (2.9.x pass, 2.10.0
to 2.12.1 a C++ compile error, 2.13.0 the wrong gradient): every endpoint labelled with its own verdict, every
change named, and a bisection asked for one verdict and signature (what `bringup triage` asks for a group) finds
the first candidate with that one. Fake candidates (tests/bisect/fakeplugin.py's wheels: no torch installed)."""

from __future__ import annotations

from pathlib import Path

from bringup.bisect import plan
from bringup.bisect.plan import Seen
from tests.bisect.fakeplugin import versions, write_wheels
from tests.bisect.test_bisect_cli import _bisect, _env

# The plugin's version picks what the repro does: 0.1-0.2 right, 0.3-0.6 a compile error (an uncaught exception,
# as inductor's C++ error reaches a repro), 0.7 wrong numbers (exit 1), printing its signature.
MQA_LIKE = """
import sys
import bringup_fakeplugin as p

minor = int(p.__version__.split(".")[1])
if minor <= 2:
    print("input-grad rel error vs eager: 9.1e-08")
    sys.exit(0)
if minor <= 6:
    raise RuntimeError("C++ compile error: 'tmp5' was not declared in this scope")
print("input-grad rel error vs eager: 0.548")
print("signature: numeric: aten::_scaled_dot_product_flash_attention_for_cpu_backward | float32")
sys.exit(1)
"""
SIGNATURE = "numeric: aten::_scaled_dot_product_flash_attention_for_cpu_backward | float32"


def test_the_search_names_each_change_of_a_three_verdict_range() -> None:
    verdicts = ["pass", "pass", "error", "error", "error", "error", "fail_numeric"]
    seen: dict[int, Seen] = {}
    while (st := plan.step(7, seen)).done is None:
        seen.update({i: Seen(i, verdicts[i]) for i in st.run})
    con = st.done
    assert con.kind == plan.FOUND and con.changes == ((1, 2), (5, 6))
    assert (con.first_new, con.new) == (2, "error")
    assert {4, 5} & set(seen)  # the releases between the error and the wrong numbers are run (2.12.x)


def test_endpoints_keep_their_own_verdicts_and_a_signature_is_found(tmp_path: Path) -> None:
    write_wheels(tmp_path / "wheels", versions(7), fault_from="9.9.9")
    repro = tmp_path / "repro.py"
    repro.write_text(MQA_LIKE)
    env = _env(tmp_path)
    p, ans = _bisect(tmp_path, str(repro), "--wheels", str(tmp_path / "wheels"), "--repeat", "1", rc=0, env=env)
    assert (ans["old"]["verdict"], ans["new"]["verdict"]) == ("pass", "fail_numeric")  # each endpoint its own
    assert ans["found"] == {"old": "pass", "new": "error"}
    assert [(c["to"], c["verdicts"]) for c in ans["changes"]] == [
        ("bringup-fakeplugin==0.3.0", ["pass", "error"]),
        ("bringup-fakeplugin==0.7.0", ["error", "fail_numeric"]),
    ]
    assert "0.3.0 is the first error" in ans["message"] and "0.7.0 is the first fail_numeric" in ans["message"]
    assert _ran(ans) >= {"0.5.0", "0.6.0"}  # the 2.12.x of this range: run, where the old search never went
    # asked for the group's verdict and signature: the compile errors are a third verdict, stepped over
    args = ["--new-verdict", "fail_numeric", "--new-signature", SIGNATURE, "--repeat", "1"]
    p, ans = _bisect(tmp_path, str(repro), "--wheels", str(tmp_path / "wheels"), *args, rc=1, env=env)
    assert ans["result"] == "ambiguous" and ans["first_new"]["version"] == "0.7.0"
    assert ans["first_new"]["signature"] == SIGNATURE and ans["first_new"]["verdict"] == "fail_numeric"
    assert ans["other"] and all(o["verdict"] == "error (another signature)" for o in ans["other"])
    # a signature the repro never shows: the new endpoint is not the failure asked for
    p, ans = _bisect(
        tmp_path,
        str(repro),
        "--wheels",
        str(tmp_path / "wheels"),
        "--new-verdict",
        "fail_numeric",
        "--new-signature",
        "numeric: aten::silu | float32",
        "--repeat",
        "1",
        rc=1,
        env=env,
    )
    assert ans["result"] == "endpoint_unusable" and ans["new"]["verdict"] == "fail_numeric (another signature)"


def _ran(ans: dict) -> set[str]:
    return {c["version"] for c in ans["candidates"] if c["ran"]}


def test_the_compiler_bisector_follow_up_runs_on_a_real_repro(tmp_path: Path) -> None:
    """bisect's follow-up on the failing side: PyTorch's compiler bisector (bringup/bisect/compiler_driver.py) over
    a real repro in a candidate env (it sees this Python's torch: --inherit-site). The repro fails on every
    candidate (`--all`, no change): the bisector runs on the newest and names the wrong decomposition."""
    write_wheels(tmp_path / "wheels", versions(2), fault_from="9.9.9")
    repro = Path(__file__).parent / "repros" / "wrong_decomposition.py"
    args = ["--wheels", str(tmp_path / "wheels"), "--inherit-site", "--all", "--repeat", "1", "--compiler-bisect", "on"]
    p, ans = _bisect(tmp_path, str(repro), *args, "--followup-budget", "600", rc=None, env=_env(tmp_path))
    assert ans["result"] == "every" and not ans["changes"] and ans["new"]["verdict"] == "fail_numeric", ans["message"]
    follow = ans["followups"]["compiler_bisect"]
    assert follow["status"] == "pass" and follow["label"] == "bringup-fakeplugin==0.2.0", follow["reason"]
    res = follow["answer"]["result"]
    assert (res["backend"], res["subsystem"]) == ("aot_eager_decomp_partition", "decomposition")
    assert "hardswish" in str(res["debug_info"])
    backends = [r["backend"] for r in follow["answer"]["runs"]]
    assert backends[:3] == ["eager", "aot_eager", "aot_eager_decomp_partition"]  # the bisector's own order
    assert "aot_eager_decomp_partition / decomposition, application #" in " ".join(p.stdout.split())
