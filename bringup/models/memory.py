"""Memory preflight for full-size models: will training fit the device, before anything is built?

Estimate (bytes) for one training step of a model on the meta device (no memory used to count it):
  params     P x bytes(param dtype)                              (mixed precision: fp32 weights)
  grads      P x bytes(param dtype)
  optimizer  AdamW: 2 states x P x bytes(param dtype)            (exp_avg, exp_avg_sq)
  activations, per layer saved for backward, in the compute dtype (e bytes):
             b*s*(ACT_HIDDEN*h + ACT_FFN*f_active) * e           (norm/attn/residual inputs, MLP)
           + b*heads*s*s * e * ACT_SCORES                         (attention probabilities: eager attention
                                                                   only; SDPA / flash keep no s x s matrix)
             x layers, plus the head: b*s*vocab * (e + 4) * 2     (logits, fp32 softmax and its grad)
  f_active = intermediate size, or top-k x expert size (+ shared experts) for MoE layers.
The coefficients follow Korthikanti et al. 2022 ("Reducing activation recomputation", 34*s*b*h + 5*a*s^2*b
bytes per layer at 16 bits: 17 values per hidden unit, 2.5 per score), split between the attention part
(ACT_HIDDEN) and the MLP part (ACT_FFN, 4 values per intermediate unit: up, gate, act, product).

Free memory: `torch.accelerator.get_memory_info` on an accelerator (the device module's `mem_get_info`
where that is missing), `psutil.virtual_memory().available` on cpu; None when the backend can't say.
A model whose estimate exceeds FIT_FRACTION of the free memory is `unsupported`, with the numbers and the
--nproc that FSDP2 sharding of params, grads and optimizer state (activations stay per rank) would need.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import psutil
import torch

ACT_HIDDEN = 9.0  # values per hidden unit per token per layer (34 bytes / 2 minus the 4*h MLP share of h)
ACT_FFN = 4.0  # values per intermediate unit per token per layer (up, gate, activation, product)
ACT_SCORES = 2.5  # values per attention score (probabilities, dropout-free softmax grad input)
FIT_FRACTION = 0.9  # leave 10% for the allocator, the runtime, fragmentation
ADAMW_STATES = 2
GIB = 2**30


@dataclass
class Estimate:
    params: int
    param_bytes: int
    grad_bytes: int
    optimizer_bytes: int
    activation_bytes: int
    free_bytes: int | None
    layers: int
    note: str = ""

    @property
    def total(self) -> int:
        return self.param_bytes + self.grad_bytes + self.optimizer_bytes + self.activation_bytes

    @property
    def sharded(self) -> int:
        return self.param_bytes + self.grad_bytes + self.optimizer_bytes

    def fits(self) -> bool | None:
        return None if self.free_bytes is None else self.total <= FIT_FRACTION * self.free_bytes

    def suggested_nproc(self) -> int | None:
        """Ranks FSDP2 would need: params, grads and optimizer state split n ways, activations not, plus
        one layer's full params gathered at a time. None when even that can't fit (activations alone)."""
        if self.free_bytes is None:
            return None
        per_layer = self.param_bytes / max(1, self.layers)
        room = FIT_FRACTION * self.free_bytes - self.activation_bytes - 2 * per_layer
        if room <= 0:
            return None
        return max(1, math.ceil(self.sharded / room))

    def summary(self) -> str:
        def g(n: float) -> str:
            return f"{n / GIB:.2f} GiB"

        free = "unknown" if self.free_bytes is None else g(self.free_bytes)
        return (
            f"needs {g(self.total)} (params {g(self.param_bytes)} + grads {g(self.grad_bytes)} + AdamW "
            f"{g(self.optimizer_bytes)} + activations {g(self.activation_bytes)}) vs {free} free"
        )

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "total": self.total, "fits": self.fits(), "suggested_nproc": self.suggested_nproc()}


def _get(cfg: Any, *keys: str, default: Any = None) -> Any:
    for k in keys:
        v = getattr(cfg, k, None)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return v
    return default


def activation_bytes(
    cfg: Any, batch: int, seq: int, compute_bytes: int, eager_attention: bool = True
) -> tuple[int, int]:
    """(bytes, layers) of the activations one training step keeps, by the module docstring's formula."""
    try:
        t = cfg.get_text_config()
    except Exception:
        t = cfg
    h = int(_get(t, "hidden_size", "d_model", "n_embd", "dim", "embed_dim", default=0) or 0)
    if not h:
        hs = getattr(t, "hidden_sizes", None)
        h = int(hs[-1]) if isinstance(hs, (list, tuple)) and hs else 512
    layers = int(_get(t, "num_hidden_layers", "n_layer", "num_layers", "n_layers", default=0) or 0)
    layers += int(_get(t, "decoder_layers", default=0) or 0) if _get(t, "encoder_layers") else 0
    if not layers:
        depths = getattr(t, "depths", None)
        layers = int(sum(depths)) if isinstance(depths, (list, tuple)) else 12
    heads = int(_get(t, "num_attention_heads", "n_head", "num_heads", "encoder_attention_heads", default=1) or 1)
    ffn = int(
        _get(t, "intermediate_size", "ffn_dim", "n_inner", "d_ff", "hidden_dim", "encoder_ffn_dim", default=4 * h)
        or 4 * h
    )
    moe = _get(t, "moe_intermediate_size")
    k = _get(t, "num_experts_per_tok", "moe_topk")
    if moe and k:
        ffn = int(moe * k + (_get(t, "shared_expert_intermediate_size", default=0) or 0))
    elif k and _get(t, "num_local_experts"):
        ffn = int(ffn * k)
    vocab = int(_get(t, "vocab_size", default=0) or 0)
    per_layer = batch * seq * (ACT_HIDDEN * h + ACT_FFN * ffn) * compute_bytes
    scores = batch * heads * seq * seq * compute_bytes * ACT_SCORES if eager_attention else 0
    head = batch * seq * vocab * (compute_bytes + 4) * 2
    return int(layers * (per_layer + scores) + head), layers


def free_memory(device: torch.device) -> int | None:
    if device.type == "cpu":
        try:
            return int(psutil.virtual_memory().available)
        except Exception:
            return None
    try:
        free, _ = torch.accelerator.get_memory_info(device)
        return int(free)
    except Exception:
        pass
    mod = torch.get_device_module(device)
    fn = getattr(mod, "mem_get_info", None)
    try:
        return int(fn(device)[0]) if fn is not None else None
    except Exception:
        return None


def estimate(
    meta_model: torch.nn.Module,
    param_dtype: torch.dtype,
    compute_dtype: torch.dtype,
    batch: int,
    seq: int,
    free_bytes: int | None,
) -> Estimate:
    """The preflight estimate of a model built on the meta device."""
    seen: set[int] = set()
    n = 0
    for p in meta_model.parameters():
        if id(p) not in seen:
            seen.add(id(p))
            n += p.numel()
    pb = torch.empty((), dtype=param_dtype).element_size()
    cb = torch.empty((), dtype=compute_dtype).element_size()
    impl = getattr(meta_model.config, "_attn_implementation", None) or "eager"
    act, layers = activation_bytes(meta_model.config, batch, seq, cb, eager_attention=impl == "eager")
    return Estimate(
        params=n,
        param_bytes=n * pb,
        grad_bytes=n * pb,
        optimizer_bytes=ADAMW_STATES * n * pb,
        activation_bytes=act,
        free_bytes=free_bytes,
        layers=layers,
    )
