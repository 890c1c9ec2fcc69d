"""Peak FLOP/s: the vendor table, the environment override, and the run's one calibrated figure.

`run_peak(device, dtype, run_dir)` is what every MFU of a run uses: the first case that asks for a
(device, dtype) computes it (table row, BRINGUP_PEAK_FLOPS, else a calibrated GEMM) and writes it to
`<run dir>/peak_flops.json` under a file lock; every later case of the run (any worker, any process,
and a resumed run) reads the same figure. The driver copies the file into the run's info and
summary.json (`run_peak_flops`), so a report names the one peak its MFUs were computed against.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import torch

from bringup.device.names import dtype_name
from bringup.errors import BadInput
from bringup.files import atomic_write_text

PEAKS_FILE = "peak_flops.json"


@dataclass(frozen=True)
class PeakFlops:
    flops: float  # FLOP/s of ONE device (what one torch device index is; see `unit`)
    source: str  # "table: <row> (<where the number comes from>)" or "calibrated: <how>"
    unit: str = "device"

    @property
    def calibrated(self) -> bool:
        return self.source.startswith("calibrated")


# Dense (no sparsity) peak FLOP/s by device-name pattern. bf16 also serves fp16 (same tensor-core
# rate on every row here). fp32 is given only where vendors publish a non-tensor-core figure, since
# torch's default float32 matmul precision ("highest") doesn't use TF32; missing -> calibrated.
# `unit` says what one torch device is on that hardware.
@dataclass(frozen=True)
class PeakRow:
    pattern: str  # regex matched (case-insensitive) against the device name
    bf16: float | None
    fp32: float | None
    unit: str
    source: str


PEAK_TABLE: tuple[PeakRow, ...] = (
    # TorchTitan torchtitan/tools/utils.py get_peak_flops; nvidia.com/en-us/data-center/a100
    PeakRow(r"A100", 312e12, 19.5e12, "GPU", "TorchTitan get_peak_flops; NVIDIA A100 datasheet"),
    # TorchTitan; NVIDIA H100 datasheet (NVL / PCIe / SXM rows, dense)
    PeakRow(r"H100.*NVL", 835e12, 60e12, "GPU", "TorchTitan get_peak_flops; NVIDIA H100 datasheet"),
    PeakRow(r"H100.*PCIe", 756e12, 51e12, "GPU", "TorchTitan get_peak_flops; NVIDIA H100 datasheet"),
    PeakRow(r"H100", 989e12, 67e12, "GPU", "TorchTitan get_peak_flops; NVIDIA H100 SXM datasheet"),
    # TorchTitan; nvidia.com/en-us/data-center/h200 (same SM complex as H100 SXM)
    PeakRow(r"H200", 989e12, 67e12, "GPU", "TorchTitan get_peak_flops; NVIDIA H200 datasheet"),
    # TorchTitan; NVIDIA Blackwell datasheet (B200, dense bf16)
    PeakRow(r"B200", 2.25e15, None, "GPU", "TorchTitan get_peak_flops; NVIDIA Blackwell datasheet"),
    # TorchTitan; amd.com MI300X / MI325X product pages
    PeakRow(r"MI300X|MI325X", 1300e12, 163.4e12, "GPU", "TorchTitan get_peak_flops; AMD MI300X page"),
    # AMD MI355X product page: 2.5 PFLOP/s bf16 dense
    PeakRow(r"MI355X", 2500e12, 157.3e12, "GPU", "AMD Instinct MI355X product page"),
    # TorchTitan; per GCD (one torch device = one GCD)
    PeakRow(r"MI250X", 191.5e12, None, "GCD", "TorchTitan get_peak_flops; AMD MI250X page"),
    # TorchTitan: 512 ops x 1300 MHz x 512 compute units (full EU mode)
    PeakRow(r"Data Center GPU Max 1550", 340.8e12, None, "tile", "TorchTitan get_peak_flops (PVC)"),
    # TorchTitan; NVIDIA L40S datasheet
    PeakRow(r"L40S", 362e12, 91.6e12, "GPU", "TorchTitan get_peak_flops; NVIDIA L40S datasheet"),
    # AWS Trainium2: 667 TFLOP/s bf16 dense per chip (aws.amazon.com/ai/machine-learning/trainium,
    # Trn2 instance = 16 chips, 10.7 PFLOP/s bf16 dense). The seeds' 14,156 tok/s at 30.47% MFU on
    # 16 chips implies ~630-710 TFLOP/s per chip, consistent. One torch "neuron" device may be a
    # logical NeuronCore, not a chip: set BRINGUP_PEAK_FLOPS for per-core MFU.
    PeakRow(r"Trainium2|trn2", 667e12, 181e12, "chip", "AWS Trainium2 product page, per chip"),
    # AWS Trainium3 (re:Invent 2025) publishes 2.52 PFLOP/s FP8 dense per chip and no bf16/fp32 dense
    # figure we could source: the row exists so the name is recognised, and bf16/fp32 are calibrated.
    PeakRow(r"Trainium3|trn3", None, None, "chip", "AWS Trainium3 announcement: FP8 only"),
)


def table_peak(device_name: str, dtype: torch.dtype) -> PeakRow | None:
    for row in PEAK_TABLE:
        if re.search(row.pattern, device_name, re.IGNORECASE):
            flops = row.bf16 if dtype in (torch.bfloat16, torch.float16) else row.fp32
            return row if flops and dtype in (torch.bfloat16, torch.float16, torch.float32) else None
    return None


def env_peak() -> PeakFlops | None:
    env = os.environ.get("BRINGUP_PEAK_FLOPS")
    if not env:
        return None
    try:
        flops = float(env)
    except ValueError as e:
        raise BadInput(f"BRINGUP_PEAK_FLOPS must be a number, got {env!r}") from e
    if not flops > 0 or flops == float("inf"):
        raise BadInput(f"BRINGUP_PEAK_FLOPS must be a positive number, got {env!r}")
    return PeakFlops(flops, "BRINGUP_PEAK_FLOPS environment override")


class Measured(Protocol):
    """What the run's peak reads of a device (a bringup.device.Device): its name and its peak."""

    @property
    def name(self) -> str: ...

    def peak_flops(self, dtype: torch.dtype = ..., calibrate: bool = ...) -> PeakFlops | None: ...


def _key(device: Measured, dtype: torch.dtype) -> str:
    return f"{device.name}/{dtype_name(dtype)}"


def run_peak(device: Measured, dtype: torch.dtype, run_dir: Path | str | None) -> PeakFlops | None:
    """The run's peak FLOP/s for (device, dtype): computed once per run (by whichever case asks first)
    and shared through `<run_dir>/peak_flops.json`; without a run dir, computed here."""
    if run_dir is None:
        return device.peak_flops(dtype)
    from filelock import FileLock

    root = Path(run_dir)
    root.mkdir(parents=True, exist_ok=True)
    path, key = root / PEAKS_FILE, _key(device, dtype)
    with FileLock(str(root / (PEAKS_FILE + ".lock"))):
        known = read_run_peaks(root)
        if key in known:
            got = known[key]
            return None if got is None else PeakFlops(float(got["flops"]), str(got["source"]), str(got["unit"]))
        pk = device.peak_flops(dtype)
        known[key] = None if pk is None else asdict(pk)
        atomic_write_text(path, json.dumps(known, indent=1, sort_keys=True))
    return pk


def read_run_peaks(run_dir: Path | str) -> dict[str, Any]:
    """{"<device>/<dtype>": {"flops", "source", "unit"} | None} of a run ({} when none was needed)."""
    try:
        data = json.loads((Path(run_dir) / PEAKS_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
