"""`bringup devices`: what this torch build sees, what bringup would use, and how fast it is."""

from __future__ import annotations

import argparse
import platform
from dataclasses import dataclass
from typing import Any

from bringup.files import check_outputs, write_json
from bringup.options import CommandOptions, add_options, flag, measured
from bringup.session import CommandSession


@dataclass(frozen=True)
class DevicesOptions(CommandOptions):
    """`bringup devices`' options: each field its flag (the parser is built from them)."""

    no_calibrate: bool = measured(
        False,
        "the peaks shown are the table's, not measured",
        flag=flag("--no-calibrate", action="store_true", help="skip the GEMM calibration (table peaks only)"),
    )


OPTIONS = DevicesOptions


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_options(p, DevicesOptions)


def collect(sess: CommandSession, calibrate: bool = True) -> dict[str, Any]:
    import torch  # lazy: torch-free --help

    from bringup.device import (  # lazy: torch-free --help
        auto_choice,
        built_accelerator,
        dtype_name,
        known_types,
        privateuse1_name,
        resolve_device,
    )

    present: list[dict[str, Any]] = []
    for t in known_types():
        try:
            d = resolve_device(t)
        except Exception:
            continue
        present.append({"type": t, "count": d.count(), "name": d.device_name})
    dev = sess.device
    peaks = {}
    for dt in (torch.float32, torch.bfloat16):
        pk = dev.peak_flops(dt, calibrate=calibrate)
        peaks[dtype_name(dt)] = None if pk is None else {"flops": pk.flops, "source": pk.source, "unit": pk.unit}
    try:
        backends = list(torch._dynamo.list_backends())
    except Exception as e:  # pragma: no cover - depends on the torch build
        backends = [f"(list_backends failed: {e})"]
    built = built_accelerator()
    auto, why = auto_choice()
    compiled_in = [] if built is None else [built.type]
    pu1 = privateuse1_name()
    if pu1 != "privateuseone" and pu1 not in compiled_in:
        compiled_in.append(pu1)
    available = [d["type"] for d in present if d["type"] != "cpu" and d["count"] > 0]
    return {
        "torch": torch.__version__,
        "torch_build": torch_build(),
        "accelerators_built_in": compiled_in,
        "accelerators_available": available,
        "built_in_no_device": [t for t in compiled_in if t not in available],
        "auto": auto.name,
        "auto_reason": why,
        "python": platform.python_version(),
        "host": platform.node(),
        "devices": present,
        "default": auto.name,
        "selected": dev.name,
        "selected_name": dev.device_name,
        "timing": "torch.Event" if dev.has_timing_events else "perf_counter after synchronize",
        "adapter": dev.adapter.describe(),
        "peak_flops": peaks,
        "compile_backends": backends,
        "privateuse1": privateuse1_name(),
        "plugins": list(sess.imports),
    }


def torch_build() -> str:
    """cpu | cuda X.Y | rocm X.Y | xpu: what this torch wheel was built for (not what is present)."""
    import torch  # lazy: torch-free --help

    if getattr(torch.version, "hip", None):
        return f"rocm {torch.version.hip}"
    if getattr(torch.version, "cuda", None):
        return f"cuda {torch.version.cuda}"
    if getattr(torch.version, "xpu", None):
        return f"xpu {torch.version.xpu}"
    return "cpu"


def main(sess: CommandSession) -> int:
    from rich.markup import escape  # here, not at the top: `bringup --help` builds the parser without rich
    from rich.table import Table  # lazy: fast --help

    opts, common = sess.options.of(DevicesOptions), sess.options.common
    check_outputs(common)
    info = collect(sess, calibrate=not opts.no_calibrate)
    c = sess.console
    t = Table(title="bringup devices", show_header=False, title_justify="left")
    t.add_column(style="bold")
    t.add_column(overflow="fold")
    t.add_row("torch", f"{info['torch']} (build: {info['torch_build']})")
    built = [
        t + (" (built in, no device)" if t in info["built_in_no_device"] else "") for t in info["accelerators_built_in"]
    ]
    t.add_row("accelerators", escape(", ".join(built) or "none compiled in"))
    t.add_row("devices", escape(", ".join(f"{d['type']} x{d['count']} ({d['name']})" for d in info["devices"])))
    t.add_row("auto", escape(f"{info['auto']} ({info['auto_reason']})"))
    t.add_row("selected", escape(f"{info['selected']} ({info['selected_name']}); timing: {info['timing']}"))
    ad = info["adapter"]
    t.add_row(
        "adapter",
        escape(
            f"{ad['family']} ({ad['execution']} execution); compile backend "
            f"{ad['default_compile_backend']}; distributed backend {ad['distributed_backend'] or 'none'}; "
            f"memory: {ad['memory_gap'] or 'measured'}; backend fallback counter: "
            f"{'yes' if ad['fallback_counter'] else 'no'}"
        ),
    )
    for dt, pk in info["peak_flops"].items():
        t.add_row(
            f"peak {dt}",
            "-" if pk is None else escape(f"{pk['flops'] / 1e12:.3f} TFLOP/s per {pk['unit']} [{pk['source']}]"),
        )
    t.add_row("compile backends", ", ".join(info["compile_backends"]))
    t.add_row("plugins", ", ".join(info["plugins"]) or "none")
    t.add_row("PrivateUse1 name", info["privateuse1"])
    c.print(t)
    if common.json:
        write_json(common.json, info)
    return 0
