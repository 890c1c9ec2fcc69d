#!/usr/bin/env bash
# One check of bringup on a real accelerator, at most ~9 minutes on one H100/H200-class GPU:
# `bringup train` (the seeds' table), then FlexAttention forward+backward and a bf16 zoo sample.
#
#   make setup && bash bench/gpu_check.sh            (from a fresh clone; OUT=dir to choose where results go)
#
# bf16 qwen3-1.7b (fits any GPU of 40 GB or more with AdamW at batch 2 x 2048), every time-to-first-step
# arm (`--cache all`): the seeds' table (first step, steady step, ratio, tok/s, MFU, speed-up), the
# fastest-start table and its step-N advice, then bench/train_overhead.py if time is left. No device named: --device auto picks the machine's accelerator.
#
# MODEL, BATCH, SEQ, MODES override the defaults (e.g. a dry run on cpu: MODEL=qwen3-tiny SEQ=64).
#
# Time budget (estimates for one H200; the compile budget turns a slow compile into `budget`, not a
# hang): 11 fresh workers x ~10 s start-up, compile / nested / aot cold ~60-120 s each, regional cold
# ~20-40 s, warm and artifact ~10-20 s each, 11 x 10 steps of ~0.15 s: the train share may cut the last
# arms (each finished case is already in the store; the cut ones say `budget`/are missing). Every command has its own timeout; the script stops at
# TOTAL seconds (default 540): train gets what is left minus 170 s, then flex (bench/gpu_flex.yaml: 8
# mods, bf16, fwd+bwd, b2 s2048 16/2 heads d128) up to 110 s, then zoo (6 causal LMs, bf16) with the
# rest. Results stay in the SQLite store as each case finishes, so a section cut short keeps its cases.
# Each section is stopped with TERM at its share and KILLed 15 s later (`timeout -k`), and every share
# leaves 30 s for that shutdown: on 2026-11-30 a first H200 run with bare `timeout`s ran past its 525 s
# TOTAL into its host's 580 s limit and was killed before anything was copied out (cause not
# established: after TERM the driver may wait up to 40 s per worker it cleans up). Give the script
# TOTAL + 60 s, and point OUT at a folder that is kept even when the host kills the command.
set -uo pipefail
cd "$(dirname "$0")/.."
BRINGUP="${BRINGUP:-.venv/bin/bringup}"
OUT="${OUT:-gpu-check-out}"
mkdir -p "$OUT"
DB="$OUT/bringup.db"
start=$SECONDS
TOTAL="${TOTAL:-540}"
left() { echo $((TOTAL - (SECONDS - start))); }
share() { local t=$(( $(left) - $1 - 30 )); [ "$t" -gt "$2" ] && t=$2; echo "$t"; }  # share RESERVE MAX

timeout -k 15 60 "$BRINGUP" --db "$DB" devices | tee "$OUT/devices.txt"

# Every time-to-first-step arm (docs/train.md), each in a fresh worker: eager; compile, regional, nested,
# aot cold; compile, regional, nested warm; compile, regional, aot from a portable artifact in empty
# cache dirs (11 cases). CACHE=both MODES=eager,compile,regional gives the older, shorter table.
timeout -k 15 "$(share 170 100000)" "$BRINGUP" --db "$DB" train --model "${MODEL:-qwen3-1.7b}" --dtype bf16 \
    --modes "${MODES:-eager,compile,regional,nested,aot}" --cache "${CACHE:-all}" --steps 10 --warmup 4 \
    --batch "${BATCH:-2}" --seq "${SEQ:-2048}" --compile-budget 200 --case-budget 240 \
    --json "$OUT/train.json" 2>&1 | tee "$OUT/train.txt"
rc=${PIPESTATUS[0]}
echo "gpu_check: bringup train exit code $rc (0 = every mode passed, 1 = a case failed, 124 = out of time)" \
     "after $((SECONDS - start)) s; JSON: $OUT/train.json"

# FlexAttention on the accelerator: forward AND backward (cpu has no flex backward), bf16
if [ "$(left)" -gt 60 ]; then
    timeout -k 15 "$(share 30 110)" "$BRINGUP" --db "$DB" flex --matrix bench/gpu_flex.yaml --compile-budget 90 \
        --json "$OUT/flex.json" 2>&1 | tee "$OUT/flex.txt"
fi
# a bf16 zoo sample: parity vs float64 cpu, eager and compiled, of real causal-LM architectures
if [ "$(left)" -gt 60 ]; then
    timeout -k 15 "$(share 0 100000)" "$BRINGUP" --db "$DB" zoo --filter '^(llama|qwen3|gpt2|mistral|gemma2|phi3)$' \
        --dtype bf16 --steps 4 --json "$OUT/zoo.json" 2>&1 | tee "$OUT/zoo.txt"
fi

# the harness-overhead ratio (bringup's steady step / a bare loop), in whatever time is left
if [ "$(left)" -gt 90 ]; then
    timeout -k 15 "$(share 0 100000)" .venv/bin/python bench/train_overhead.py --device auto --model qwen3-0.6b --dtype bf16 \
        --batch 4 --seq 1024 --steps 30 --rounds 4 2>&1 | tee "$OUT/overhead.txt"
fi
exit "$rc"
