"""The train suite's modes beyond `bringup.models.lm.MODES` (see train/arms.py): nested compile
regions and ahead-of-time compile."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch


def nested_regions(model: torch.nn.Module, backend: str) -> torch.nn.Module:
    """Each decoder block's class gets a subclass whose forward is a nested compile region (one per
    class, shared by every block of it), then the whole model is compiled."""
    from bringup.models.lm import decoder_layers

    made: dict[type, type] = {}
    for block in decoder_layers(model):
        cls = type(block)
        if cls not in made:
            made[cls] = type(f"Nested{cls.__name__}", (cls,),
                             {"forward": torch.compiler.nested_compile_region(cls.forward)})  # fmt: skip
        block.__class__ = made[cls]
    return torch.compile(model, backend=backend)  # type: ignore[return-value]


def lm_loss(model: torch.nn.Module, input_ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return model(input_ids=input_ids, labels=labels).loss


class _Loss:
    def __init__(self, loss: torch.Tensor) -> None:
        self.loss = loss


class AOTModel(torch.nn.Module):
    """The model behind an ahead-of-time compiled loss function. `load`: a saved function's bytes (a new
    job: nothing compiles). Otherwise the first call compiles ahead of time (fullgraph) on its inputs
    and `on_compiled` receives the saved function's bytes."""

    def __init__(self, inner: torch.nn.Module, backend: str, load: bytes | None = None,
                 on_compiled: Callable[[bytes], None] | None = None) -> None:  # fmt: skip
        super().__init__()
        self.inner = inner
        self.backend = backend
        self.on_compiled = on_compiled
        self.fn: Any = None
        if load is not None:
            import io

            self.fn = torch.compiler.load_compiled_function(io.BytesIO(load), f_globals=globals())

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor) -> _Loss:
        if self.fn is None:
            compiled = torch.compile(lm_loss, fullgraph=True, backend=self.backend)
            try:
                self.fn = compiled.aot_compile(((self.inner, input_ids, labels), {}))  # type: ignore[attr-defined]
            except Exception as e:
                if type(e).__name__ == "PackageError":  # torch._dynamo.exc: a guard it cannot serialize
                    raise NotImplementedError(f"torch {torch.__version__} cannot aot_compile this model: "
                                              f"{type(e).__name__}: {e}") from e  # fmt: skip
                raise
            if self.on_compiled is not None:
                self.on_compiled(aot_bytes(self.fn))
        return _Loss(self.fn(self.inner, input_ids, labels))


def aot_bytes(fn: Any) -> bytes:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "fn.bin"
        fn.save_compiled_function(str(p))
        return p.read_bytes()
