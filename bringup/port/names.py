"""The name tables of `bringup port`'s codemod: how each torch.cuda name maps (or why it cannot), the
torch functions whose first argument is a device, the CUDA-only environment variables, and the cheap
pre-filters (`may_have_findings`, `cuda_ok_lines`). No libcst here: `codemod.py` and its rule modules
(`literals.py`, `calls.py`, `refs.py`) read these tables.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass


@dataclass(frozen=True)
class Hit:
    """A finding in one module (line 1-based, col 1-based)."""

    line: int
    col: int
    code: str
    message: str
    fixable: bool


# ---- name tables ---------------------------------------------------------------------------------
# torch.cuda.<sub>.<name> re-exported as torch.cuda.<name>
_CUDA_SUBMODULES = ("memory", "random", "streams", "graphs")
_RENAMES = {
    "torch.cuda.amp.autocast_mode.autocast": "torch.cuda.amp.autocast",
    "torch.cuda.amp.grad_scaler.GradScaler": "torch.cuda.amp.GradScaler",
    "torch.amp.autocast_mode.autocast": "torch.autocast",
    "torch.amp.autocast": "torch.autocast",
    "torch.amp.grad_scaler.GradScaler": "torch.amp.GradScaler",
    "torch.cpu.amp.autocast_mode.autocast": "torch.cpu.amp.autocast",
    "torch.amp.autocast_mode.custom_fwd": "torch.amp.custom_fwd",
    "torch.amp.autocast_mode.custom_bwd": "torch.amp.custom_bwd",
    "torch.distributed.distributed_c10d.init_process_group": "torch.distributed.init_process_group",
    "torch.distributed.distributed_c10d.new_group": "torch.distributed.new_group",
}


def normalize(qn: str) -> str:
    qn = _RENAMES.get(qn, qn)
    for sub in _CUDA_SUBMODULES:
        pre = f"torch.cuda.{sub}."
        if qn.startswith(pre):
            return "torch.cuda." + qn[len(pre) :]
    return qn


@dataclass(frozen=True)
class CudaFn:
    """How a torch.cuda function maps: `target` (torch.<target>) or None (manual)."""

    code: str
    target: str | None = None
    guard: str | None = None  # fallback value when no accelerator: the call is guarded by is_available()
    device_kw: bool = True  # its `device=` keyword becomes positional (torch.accelerator is positional-only)
    ref_ok: bool = False  # a bare reference (no call) may be renamed too (same signature)
    manual: str = ""


_ACC = "accelerator."
CUDA_FNS: dict[str, CudaFn] = {
    "is_available": CudaFn("BU110", _ACC + "is_available", ref_ok=True),
    "device_count": CudaFn("BU110", _ACC + "device_count", ref_ok=True),
    "current_device": CudaFn("BU110", _ACC + "current_device_index", ref_ok=True),
    "set_device": CudaFn("BU110", _ACC + "set_device_index", guard="None"),
    "synchronize": CudaFn("BU110", _ACC + "synchronize", guard="None"),
    "device": CudaFn("BU110", manual="use `torch.accelerator.device_index(i)` (an int index)"),
    "device_of": CudaFn("BU110", manual="use `torch.accelerator.device_index(t.device.index)`"),
    "memory_allocated": CudaFn("BU111", _ACC + "memory_allocated", guard="0"),
    "max_memory_allocated": CudaFn("BU111", _ACC + "max_memory_allocated", guard="0"),
    "memory_reserved": CudaFn("BU111", _ACC + "memory_reserved", guard="0"),
    "max_memory_reserved": CudaFn("BU111", _ACC + "max_memory_reserved", guard="0"),
    "memory_cached": CudaFn("BU111", _ACC + "memory_reserved", guard="0"),
    "max_memory_cached": CudaFn("BU111", _ACC + "max_memory_reserved", guard="0"),
    "memory_stats": CudaFn("BU111", _ACC + "memory_stats", guard="{}"),
    "reset_peak_memory_stats": CudaFn("BU111", _ACC + "reset_peak_memory_stats", guard="None"),
    "reset_max_memory_allocated": CudaFn("BU111", _ACC + "reset_peak_memory_stats", guard="None"),
    "reset_accumulated_memory_stats": CudaFn("BU111", _ACC + "reset_accumulated_memory_stats", guard="None"),
    "empty_cache": CudaFn("BU111", _ACC + "empty_cache", guard="None"),
    "mem_get_info": CudaFn("BU111", _ACC + "get_memory_info"),
    "Event": CudaFn("BU112", "Event", device_kw=False),
    "Stream": CudaFn("BU112", "Stream", device_kw=False),
    "current_stream": CudaFn("BU112", _ACC + "current_stream"),
    "set_stream": CudaFn("BU112", _ACC + "set_stream", device_kw=False),
    "stream": CudaFn("BU112", manual="use `with s:` (torch.Stream is a context manager) when s is not None"),
    "default_stream": CudaFn(
        "BU112", manual="no device-generic default stream: use torch.accelerator.current_stream()"
    ),
    "ExternalStream": CudaFn("BU112", manual="no device-generic external stream"),
    "StreamContext": CudaFn("BU112", manual="use `with s:` (torch.Stream is a context manager)"),
    "OutOfMemoryError": CudaFn("BU117", "OutOfMemoryError", device_kw=False, ref_ok=True),
    "amp.autocast": CudaFn("BU120", "autocast", device_kw=False),
    "amp.GradScaler": CudaFn("BU121", "amp.GradScaler", device_kw=False),
    "amp.custom_fwd": CudaFn("BU123", "amp.custom_fwd", device_kw=False),
    "amp.custom_bwd": CudaFn("BU123", "amp.custom_bwd", device_kw=False),
}
_RNG = {
    "manual_seed",
    "manual_seed_all",
    "seed",
    "seed_all",
    "initial_seed",
    "get_rng_state",
    "get_rng_state_all",
    "set_rng_state",
    "set_rng_state_all",
    "default_generators",
}
_PROPS = {
    "get_device_name",
    "get_device_properties",
    "get_device_capability",
    "is_bf16_supported",
    "is_tf32_supported",
    "get_arch_list",
    "get_gencode_flags",
    "utilization",
    "temperature",
    "power_draw",
    "clock_rate",
    "device_memory_used",
}
_MEMORY = {
    "ipc_collect",
    "list_gpu_processes",
    "MemPool",
    "use_mem_pool",
    "set_per_process_memory_fraction",
    "get_per_process_memory_fraction",
    "caching_allocator_alloc",
    "caching_allocator_delete",
}
_GRAPHS = {"CUDAGraph", "graph", "make_graphed_callables", "graph_pool_handle", "is_current_stream_capturing"}
_RNG_HINT = {
    "manual_seed": "torch.manual_seed(s) seeds cpu and every accelerator; "
    "torch.get_device_module(DEVICE).manual_seed(s) where the backend has it",
    "manual_seed_all": "torch.manual_seed(s) seeds cpu and every accelerator; "
    "torch.get_device_module(DEVICE).manual_seed_all(s) where the backend has it",
}
_PROP_HINT = {
    "get_device_name": "torch.get_device_module(DEVICE).get_device_name() where the backend has it, else DEVICE.type",
    "get_device_capability": "torch.accelerator.get_device_capability() returns a dict (supported dtypes), "
    "not a (major, minor) pair: test features, not CUDA versions",
    "get_device_properties": "torch.get_device_module(DEVICE).get_device_properties() where the backend has it; "
    "memory: torch.accelerator.get_memory_info()",
    "is_bf16_supported": "torch.bfloat16 in torch.accelerator.get_device_capability()['supported_dtypes']",
}

# torch functions whose first positional argument is a device: (qualified name, role, keyword)
DEV_POS0: dict[str, tuple[str, str]] = {
    "torch.Generator": ("dev", "device"),
    "torch.set_default_device": ("dev", "device"),
    "torch.get_device_module": ("dev", "device"),
    "torch.Stream": ("dev", "device"),
    "torch.Event": ("dev", "device"),
    "torch.accelerator.synchronize": ("dev", "device"),
    "torch.accelerator.current_stream": ("dev", "device"),
    "torch.accelerator.set_device_index": ("dev", "device"),
    "torch.accelerator.device_count": ("dev", "device"),
    "torch.autocast": ("amp", "device_type"),
    "torch.amp.GradScaler": ("amp", "device"),
    "torch.is_autocast_enabled": ("amp", "device_type"),
    "torch.get_autocast_dtype": ("amp", "device_type"),
    "torch.set_autocast_dtype": ("amp", "device_type"),
    "torch.set_autocast_enabled": ("amp", "device_type"),
    "torch.distributed.init_process_group": ("backend", "backend"),
    "torch.distributed.new_group": ("backend", "backend"),
    "torch.distributed.new_subgroups": ("backend", "backend"),
    "torch.distributed.Backend": ("backend", "name"),
}
ENV_RE = re.compile(r"^(CUDA_|PYTORCH_CUDA_|PYTORCH_NVML|NCCL_|TORCH_NCCL_|CUBLAS|CUDNN_|NVIDIA_|CUBLASLT_)")
ENV_HINT = {
    "CUDA_VISIBLE_DEVICES": "hides CUDA devices only; each backend has its own (HIP_VISIBLE_DEVICES, "
    "ZE_AFFINITY_MASK, NEURON_RT_VISIBLE_CORES...): select the device in code or in the launcher",
    "PYTORCH_CUDA_ALLOC_CONF": "PYTORCH_ALLOC_CONF is the device-generic name of the allocator settings",
    "CUDA_LAUNCH_BLOCKING": "CUDA-only debugging switch; other backends have their own",
}
_CUDA_HINT = re.compile(
    rb"\.cuda\b|\bcuda\s*[.,)]|import[^\n]*\bcuda\b|['\"]cuda|cudnn|['\"]nccl|is_cuda"
    rb"|['\"](?:CUDA_|PYTORCH_CUDA|PYTORCH_NVML|NCCL_|TORCH_NCCL|CUBLAS|CUDNN_|NVIDIA_)"
)


def may_have_findings(source: bytes) -> bool:
    """Fast pre-filter: a module without any of these words has no finding."""
    return _CUDA_HINT.search(source) is not None


def cuda_ok_lines(code: str) -> frozenset[int]:
    """Lines with a `# cuda-ok` comment (a deliberate CUDA-ism: no finding, no rewrite there)."""
    out = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            if tok.type == tokenize.COMMENT and re.match(r"#\s*cuda-ok\b", tok.string):
                out.add(tok.start[0])
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    return frozenset(out)


def cuda_other(name: str, device_name: str) -> tuple[str, str]:
    """(code, message) of a torch.cuda name with no device-generic rewrite (`device_name`: the
    module's device variable, named in the hints)."""
    old = f"torch.cuda.{name}" if name else "torch.cuda"
    if name in _RNG:
        return "BU113", f"{old} is CUDA-only: " + _RNG_HINT.get(
            name,
            "torch.manual_seed / torch.get_rng_state cover cpu; accelerators: "
            "torch.get_device_module(DEVICE) where the backend has it",
        ).replace("DEVICE", device_name)
    if name in _PROPS:
        return "BU114", f"{old} is CUDA-only: " + _PROP_HINT.get(
            name, "query the backend via torch.get_device_module(DEVICE) or torch.accelerator"
        ).replace("DEVICE", device_name)
    if "memory" in name.lower() or "alloc" in name.lower() or name in _MEMORY:
        return (
            "BU111",
            f"{old} is CUDA-only: no device-generic equivalent; keep it behind "
            "`if torch.accelerator.is_available()` or use torch.accelerator's memory functions",
        )
    if name == "nvtx" or name.startswith("nvtx."):
        return "BU115", f"{old} (NVTX) is CUDA-only: use torch.profiler.record_function(name)"
    if name in _GRAPHS:
        return (
            "BU116",
            f"{old} (CUDA graphs) is CUDA-only: torch.accelerator.Graph (torch >= 2.13) "
            'where the backend supports graphs, or torch.compile(mode="reduce-overhead")',
        )
    if name.endswith("Tensor") or name.endswith("Storage"):
        return (
            "BU118",
            f"{old} (legacy CUDA tensor type) is CUDA-only: use torch.empty(..., dtype=..., "
            f"device={device_name}) / torch.set_default_device({device_name})",
        )
    return (
        "BU119",
        f"{old} is CUDA-only: use torch.get_device_module({device_name}).{name or '<name>'} where the "
        "backend provides it, or a torch.accelerator API",
    )
