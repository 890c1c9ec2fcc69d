"""Benchmark: planning a Hub sweep of 100k ids from a warm config cache (signature + dedup + case list).

    .venv/bin/python bench/hub_plan.py [--ids 100000] [--seed 0] [--worst 400] [--json FILE]

The warm cache is a Hub index (bringup/hub/index.py) holding 100k synthetic ids with their config.json, built
from the 69 real configs of the shipped catalogue (bringup/models/catalogue/hub_top.json) the way the Hub is
made (tests/hub/hub_synth.py), in this mix:

    70%  fine-tune copies (another _name_or_path, storage dtype, transformers_version, use_cache)
    12%  re-tokenised copies (vocab_size + 1..4096, special token ids moved): a config.json of their own,
         the same tiny signature (vocabulary, ids shrunk)
     8%  resized (depth - 1, or width x2 with the head ratio kept): the same signature
     8%  near-duplicates (one graph field: activation, eps x U(1, 10), biases, tying, rope theta x U(1, 8),
         rope scaling, sliding window, kv heads, soft-cap): mostly distinct signatures
     2%  config failures (gated, not found, no config.json, not JSON)

Timed (in this process, after a warm-up that imports transformers' config classes): reading the index, the
signatures and the dedup (hub/plan.py plan_ids), and the case list (zoo/sweep.py signature_cases); each
reported with the number of configs really signed (the memo key, hub/signature.py raw_key, skips the rest). The
worst case, every config.json distinct, is extrapolated from the measured cost of signing `--worst` distinct
configs (no memo hits).

Numbers from a loaded machine are not figures: say so when you quote them.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bringup.hub import plan as hub_plan  # noqa: E402
from bringup.hub import refs  # noqa: E402
from bringup.hub import signature as sg  # noqa: E402
from bringup.hub.index import Entry, HubIndex  # noqa: E402
from bringup.zoo import sweep as zoo_sweep  # noqa: E402
from bringup.zoo.cases import TinyRun  # noqa: E402
from tests.hub import hub_synth as hs  # noqa: E402

MIX = (("copy", 0.70), ("retok", 0.12), ("resized", 0.08), ("near", 0.08), ("fail", 0.02))


def _kind(rng: random.Random) -> str:
    x, acc = rng.random(), 0.0
    for k, p in MIX:
        acc += p
        if x < acc:
            return k
    return MIX[-1][0]


def _near(base: dict, rng: random.Random) -> dict:
    variants = hs.near_variants(base)
    if not variants:
        return hs._noise(base, rng, "x")
    what, cfg = rng.choice(variants)
    cfg = copy.deepcopy(cfg)
    for k in ("rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "norm_eps"):
        if what.startswith("eps") and isinstance(cfg.get(k), float):
            cfg[k] = base[k] * rng.choice((2.0, 5.0, 10.0, 0.5, 0.1))
    if what == "rope_theta":
        cfg["rope_theta"] = float(base["rope_theta"]) * rng.choice((2, 4, 8))
    return cfg


def synth_entries(n: int, seed: int) -> tuple[list[Entry], dict[str, int]]:
    rng = random.Random(seed)
    cat = [e["config"] for e in refs.catalogue()]
    kinds: dict[str, int] = {}
    out = []
    for i in range(n):
        base = cat[min(int(rng.paretovariate(1.2)) - 1, len(cat) - 1)]  # a few bases carry most ids
        k = _kind(rng)
        kinds[k] = kinds.get(k, 0) + 1
        mid = f"user{i % 9973}/model-{i}"
        dl = int(1e7 / (i + 1) ** 0.9)
        if k == "fail":
            out.append(
                Entry(
                    mid,
                    "",
                    None,
                    rng.choice(("gated", "not_found_or_private", "missing_config", "bad_config")),
                    "synthetic",
                    dl,
                    0,
                )
            )
            continue
        if k == "copy":
            cfg = hs._noise(base, rng, mid)
        elif k == "retok":
            cfg = hs._noise(base, rng, mid)
            if isinstance(cfg.get("vocab_size"), int):
                cfg["vocab_size"] += rng.randint(1, 4096)
                cfg["eos_token_id"] = cfg["vocab_size"] - rng.randint(1, 8)
        elif k == "resized":
            vs = hs.resized_variants(base)
            cfg = hs._noise(rng.choice(vs)[1] if vs else base, rng, mid)
        else:
            cfg = hs._noise(_near(base, rng), rng, mid)
        out.append(Entry(mid, "", f"{i:040x}", "ok", "", dl, dl // 100, config=cfg))
    return out, kinds


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ids", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--worst", type=int, default=400, help="distinct configs signed to extrapolate the worst case")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    sg.quiet_transformers()
    t0 = time.perf_counter()
    entries, kinds = synth_entries(a.ids, a.seed)
    gen_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "hub-index.db"
        with HubIndex(path) as idx:
            idx.record(entries)
        hub_plan.plan_ids(entries[:2000])  # warm-up: config classes imported, as on any machine after one plan
        t = time.perf_counter()
        with HubIndex(path) as idx:
            warm = list(idx.all().values())
        read_s = time.perf_counter() - t
    t = time.perf_counter()
    plan = hub_plan.plan_ids(warm)
    plan_s = time.perf_counter() - t
    t = time.perf_counter()
    cases, _ = zoo_sweep.signature_cases(plan, TinyRun("fp32", 4, "inductor", 600.0, seed=0, noise_seeds=2))
    cases_s = time.perf_counter() - t
    # the worst case: every config.json distinct (no memo hit): sign `worst` distinct ones
    rng = random.Random(a.seed + 1)
    distinct = []
    for i in range(a.worst):
        cfg = copy.deepcopy(rng.choice(warm).config or refs.catalogue()[0]["config"])
        cfg["vocab_size"] = int(cfg.get("vocab_size") or 32000) + 10_000 + i  # a config.json of its own
        distinct.append(cfg)
    signer = sg.Signer()
    t = time.perf_counter()
    for cfg in distinct:
        signer(cfg)
    per_sign = (time.perf_counter() - t) / max(1, a.worst)
    total = read_s + plan_s + cases_s
    res = {
        "ids": a.ids,
        "mix": kinds,
        "generate_s": round(gen_s, 1),
        "read_index_s": round(read_s, 2),
        "plan_s": round(plan_s, 2),
        "cases_s": round(cases_s, 2),
        "total_s": round(total, 2),
        "signed": plan.signed,
        "signatures": len(plan.sigs),
        "cases": len(cases),
        "config_failures": sum(1 for r in plan.rows if r["config_status"] != "ok"),
        "ms_per_signing": round(per_sign * 1000, 2),
        "worst_case_all_distinct_s": round(read_s + cases_s + a.ids * per_sign, 1),
    }
    print(
        f"{a.ids} ids (mix {kinds}): read index {read_s:.1f} s, signatures + dedup {plan_s:.1f} s "
        f"({plan.signed} configs signed, {per_sign * 1000:.2f} ms each), case list {cases_s:.1f} s: "
        f"{total:.1f} s in all -> {len(plan.sigs)} signatures, {len(cases)} cases, "
        f"{res['config_failures']} config failures"
    )
    print(
        f"worst case (every config.json distinct, extrapolated from {a.worst} signings): "
        f"{res['worst_case_all_distinct_s']:.0f} s"
    )
    if a.json:
        Path(a.json).write_text(json.dumps(res) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
