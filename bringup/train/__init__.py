"""The pieces of `bringup train`, one concern each (the suite itself is bringup/train/suite.py):

spec.py             TrainSpec: one case's settings (JSON-able, hashed into the case id)
loop.py             build the model, apply the mode, time the steps (single process or one rank)
compile_metrics.py  dynamo's own compile metrics: phase breakdown, graph breaks, recompiles, caches
cache.py            cold / warm compile caches: fresh directories under the run directory
distributed.py      --nproc N: torchrun's launcher API, FSDP2 fully_shard per block then root
numerics.py         the loss-curve band of compiled modes around eager
summary.py          the terminal table, the "fast start" advice and the top-level JSON
"""
