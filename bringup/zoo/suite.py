"""zoo: every transformers architecture (tiny random-init configs) and timm models, each trained for
K steps on the device, eager and compiled, against a float64 CPU reference.

Per model, one case:
  a. reference: float64 on cpu (from the weights the run dtype holds), forward + backward, K SGD steps
     on fixed seeded batches -> loss curve, logits, every grad. Failure -> ref_fail (reason "config:"
     when the tiny model can't even be built, "reference:" when it can't run).
  b. trusted baseline: cpu eager in the run dtype (on cpu this IS the device eager run).
  c. device eager in the run dtype: parity of loss, logits and every grad (checks/parity.py) and the
     loss curve (checks/losscurve.py).
  d. device compiled with --compile-backend: graph count, graph breaks with reasons, recompiles and
     compile time (checks/graphs.py), parity and loss curve as in c.
  e. CPU fallbacks (not on cpu), params, wall time incl. compile, peak memory.
With --baseline BUNDLE, the run's curves and output statistics are also checked against the same
model in an exported run (another machine, say a CUDA box).

The capability's modules: args.py (the torch-free options), spec.py (a case's params as a frozen ZooSpec),
cases.py + plan.py (sources and planning), baseline.py (--baseline BUNDLE), steps.py (the one training-step loop),
run.py (the worker: model preparation, training, noise measurement), judge.py (verdicts), summary.py (the
terminal summary), section.py (HTML), full.py + fsdp.py (--size full), sweep.py (Hub sweeps: one case per
signature of bringup.hub's plan), modules.py (the module check). This module only registers the capability.
"""

from __future__ import annotations

from bringup.api import register_capability, specs
from bringup.zoo import args as face  # the torch-free face (cli)
from bringup.zoo import section as zoo_section
from bringup.zoo import sweep as zoo_sweep
from bringup.zoo.plan import build_cases, run_cases
from bringup.zoo.run import run_model  # noqa: F401 (runs stored before the split name "bringup.zoo.suite:run_model")
from bringup.zoo.summary import summarize

register_capability(
    face,
    build_cases,
    run_cases,
    summarize,
    title="Model zoo",
    section=zoo_section.render,
    metrics=specs("params", "graph_breaks", "max_rel_err", "loss_divergence", "compile_s", "peak_mem_bytes"),
    summarize_stored=zoo_sweep.summarize_stored,
)
