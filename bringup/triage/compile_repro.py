"""The scripts of compile groups: PyTorch's minified repro made portable (this machine's paths out, the device's
plugins imported first), the same script aimed at another device (the cpu check), and a graph break's standalone
fullgraph script. Pure text functions.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pprint import pformat
from typing import Any

_MACHINE_LINES = (
    re.compile(r"^os\.environ\['TORCHINDUCTOR_CACHE_DIR'\] = .*$", re.M),
    re.compile(r"^torch\._dynamo\.config\.debug_dir_root = .*$", re.M),
    re.compile(r"^torch\._inductor\.config\.(?:debug_dir|cache_dir)\w* = .*$", re.M),
)
_SAVE_DIR = re.compile(r"save_dir='[^']*'")


def clean_minified(text: str, imports: Sequence[str]) -> str:
    """The minifier's repro.py as an issue can carry it: no path of this machine (its inductor cache, its debug
    dir; the saved inputs' directory becomes None, so the inputs are random, as PyTorch's minifier supports for
    shared repros: the check then shows they reproduce it), the device's plugins imported after torch."""
    for pat in _MACHINE_LINES:
        text = pat.sub("", text)
    text = _SAVE_DIR.sub("save_dir=None", text)
    head = "# Minified by PyTorch's minifier (torch._dynamo.repro), run by `bringup triage`.\n"
    plug = "".join(f"\nimport {m}  # the device's plugin" for m in imports)
    text = re.sub(r"^import torch$", lambda m: m.group(0) + plug, text, count=1, flags=re.M)
    return head + re.sub(r"\n{3,}", "\n\n", text).lstrip("\n")


def retarget(text: str, device: str, to: str = "cpu") -> str:
    """The same script with every `device` named in it (the minifier writes device(type='X', index=0) for the
    inputs, and graphs may hold device constants) replaced by `to`."""
    dev = re.escape(device)
    text = re.sub(rf"device\(type='{dev}'(?:, index=\d+)?\)", f"device(type='{to}')", text)
    return re.sub(rf"(['\"]){dev}(?::\d+)?\1", rf"\1{to}\1", text)


BREAK_SCRIPT = '''\
"""Repro written by `bringup triage`: {title}
The model compiled with fullgraph=True: dynamo raises at the graph break. Run: python repro.py [--device DEV]
(exit 1: the compile breaks; exit 0: one graph)"""
import argparse, importlib, sys

import torch

DEVICE, BACKEND, IMPORTS, SIGNATURE = {device!r}, {backend!r}, {imports!r}, {signature!r}
ap = argparse.ArgumentParser()
ap.add_argument("--device", default=DEVICE)
opts = ap.parse_args()
for m in IMPORTS:
    importlib.import_module(m)
torch.manual_seed(0)
{build}
model = model.to(opts.device)
compiled = torch.compile(model, backend=BACKEND, fullgraph=True)  # the forward, as the sweep compiled it
try:
    run(compiled, opts.device)
except Exception as e:
    print(f"fullgraph compile on {{opts.device}} failed: {{type(e).__name__}}: {{str(e).splitlines()[0]}}")
    print(f"signature: {{SIGNATURE}}")
    sys.exit(1)
print(f"fullgraph compile on {{opts.device}}: one graph")
'''

_HF_BUILD = """import transformers

CONFIG = {config}
cfg = transformers.AutoConfig.for_model(**CONFIG)
model = getattr(transformers, {cls!r})._from_config(cfg)


def run(model, device):
    ids = torch.randint(0, cfg.vocab_size, (2, 32), generator=torch.Generator().manual_seed(0)).to(device)
    out = model(input_ids=ids, labels=ids)
    out.loss.backward()"""

_FN_BUILD = """from {module} import {function}

built = {function}()
model, example = built if isinstance(built, tuple) else (built, None)


def run(model, device):
    out = model(example.to(device))
    (out if isinstance(out, torch.Tensor) else out[0]).float().sum().backward()"""


def break_script(
    zoo: Mapping[str, Any],
    imports: Sequence[str],
    title: str,
    device: str,
    config: Mapping[str, Any] | None = None,
    cls: str = "",
    signature: str = "",
) -> str | None:
    """A standalone fullgraph script for a zoo case: an hf model from its config (`config`, JSON values; `cls`: the
    model's class in transformers), or the user's `module:function`; None for other sources."""
    if zoo.get("source") == "hf" and config is not None and cls:
        build = _HF_BUILD.format(config=pformat(dict(config), width=110, sort_dicts=True), cls=cls)
    elif zoo.get("source") == "fn" and ":" in str(zoo.get("model")):
        module, _, function = str(zoo["model"]).partition(":")
        build = _FN_BUILD.format(module=module, function=function)
    else:
        return None
    return BREAK_SCRIPT.format(
        title=title.replace('"' * 3, "'" * 3),
        device=device,
        backend=str(zoo.get("backend")),
        imports=list(imports),
        signature=signature,
        build=build,
    )


COMPILED_RUNNER = '''\
"""Written by `bringup triage` for `bringup bisect`: the minified repro beside it (repro.py, PyTorch's minifier's),
run through torch.compile with its backend, forward and backward, as its own `run` command runs it through
torch._dynamo.optimize: the compiler bisector (torch._inductor.compiler_bisector) overrides torch.compile's backend,
so it can split this run. Exit 0: it compiles and runs; a traceback: it does not."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import torch  # noqa: E402
from torch._dynamo.debug_utils import InputReader, run_fwd_maybe_bwd  # noqa: E402

import repro  # noqa: E402  (its __main__ block does not run on import)

reader = InputReader(None)  # random inputs, as the checked repro ran
repro.load_args(reader)
run_fwd_maybe_bwd(torch.compile(repro.mod, backend={backend!r}), reader.args)
print("compiled and ran")
'''


def compiled_runner(backend: str) -> str:
    """The runner of a minified repro through torch.compile (what the compiler bisector needs)."""
    return COMPILED_RUNNER.format(backend=backend)
