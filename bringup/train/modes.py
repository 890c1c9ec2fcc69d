"""The train suite's modes beyond `bringup.models.lm.MODES` (see train/arms.py): nested compile
regions and ahead-of-time compile."""

from __future__ import annotations

import hashlib
import io
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from bringup.compat import name_kernel_funcs
from bringup.models.lm import decoder_layers


def nested_regions(model: torch.nn.Module, backend: str, dynamic: bool | None = None) -> torch.nn.Module:
    """Each decoder block's class gets a subclass whose forward is a nested compile region (one per
    class, shared by every block of it), then the whole model is compiled."""
    made: dict[type, type] = {}
    for block in decoder_layers(model):
        cls = type(block)
        if cls not in made:
            made[cls] = type(
                f"Nested{cls.__name__}", (cls,), {"forward": torch.compiler.nested_compile_region(cls.forward)}
            )
        block.__class__ = made[cls]
    return torch.compile(model, backend=backend, dynamic=dynamic)  # type: ignore[return-value]  # a module in, a module out


def lm_loss(model: torch.nn.Module, input_ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return model(input_ids=input_ids, labels=labels).loss


class _Loss:
    def __init__(self, loss: torch.Tensor) -> None:
        self.loss = loss


class AOTModel(torch.nn.Module):
    """The model behind an ahead-of-time compiled loss function. `load`: a saved function's bytes (a new
    job: nothing compiles). Otherwise the first call compiles ahead of time (fullgraph, guards filtered by
    `portable_guards`) on its inputs and `on_compiled` receives the saved function's bytes and the
    checksums of the source it traced (`traced_sources`). `dynamic`: torch.compile's; the function serves
    only the shapes its guards allow (dynamic=True: symbolic sizes), since nothing can recompile it: a call
    outside them is a gap of the remedy (NotImplementedError), not a crash."""

    def __init__(
        self,
        inner: torch.nn.Module,
        backend: str,
        load: bytes | None = None,
        on_compiled: Callable[[bytes, dict[str, str]], None] | None = None,
        dynamic: bool | None = None,
    ) -> None:
        super().__init__()
        self.inner = inner
        self.backend = backend
        self.dynamic = dynamic
        self.on_compiled = on_compiled
        self.fn: Any = None
        if load is not None:
            name_kernel_funcs()  # the names the saved graphs and guards use for the model's classes (compat.py)
            self.fn = torch.compiler.load_compiled_function(io.BytesIO(load), f_globals=globals())

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor) -> _Loss:
        if self.fn is None:
            name_kernel_funcs()  # the graphs it saves name the model's classes (compat.py)
            compiled = torch.compile(
                lm_loss,
                fullgraph=True,
                backend=self.backend,
                dynamic=self.dynamic,
                options={"guard_filter_fn": portable_guards},
            )
            try:
                # Python floats specialized: aot_compile has no restart loop, and with dynamic shapes dynamo
                # raised the restart it uses to specialize one (TensorifyScalarRestartAnalysis, torch 2.13)
                with torch._dynamo.config.patch(specialize_float=True):
                    self.fn = compiled.aot_compile(((self.inner, input_ids, labels), {}))  # type: ignore[attr-defined]  # torch >= 2.10, untyped
            except Exception as e:
                if type(e).__name__ == "PackageError":  # torch._dynamo.exc: a guard it cannot serialize
                    raise NotImplementedError(
                        f"torch {torch.__version__} cannot aot_compile this model: {type(e).__name__}: {e}"
                    ) from e
                raise
            if self.on_compiled is not None:
                self.on_compiled(aot_bytes(self.fn), traced_sources(self.fn))
        try:
            return _Loss(self.fn(self.inner, input_ids, labels))
        except RuntimeError as e:  # torch 2.13's AOTCompiledFunction: its guards refused these inputs
            if not str(e).startswith("GuardManager check failed"):
                raise
            why = " ".join(str(e).split())[:300]
            raise NotImplementedError(
                f"the AOT-compiled function does not serve input_ids of shape "
                f"{tuple(input_ids.shape)} (compiled with dynamic={self.dynamic}) and nothing "
                f"can recompile it: compile it with dynamic shapes (--dynamic on) ({why})"
            ) from e


def portable_guards(entries: Sequence[Any]) -> list[bool]:
    """The guards an AOT-compiled function keeps: aot_compile's own default filter (no guard on a global,
    none of the types `CheckFunctionManager.UNSUPPORTED_SERIALIZATION_GUARD_TYPES` names: an object's id
    means nothing in another process), applied to each guard's derived types too. transformers' forward
    decorators are closures, and dynamo guards the wrapped function's `__code__` by id (a CONSTANT_MATCH
    built on an ID_MATCH): with the default filter that one guard made `aot_compile` raise
    `PackageError: ID_MATCH guard cannot be serialized` on every HF model (torch 2.13, measured). What
    those guards protected (the traced code is the code that runs) is checked when the file is loaded
    instead, by the checksums of the traced modules' source (`traced_sources`, train/artifact.py)."""
    from torch._dynamo.guards import CheckFunctionManager  # lazy: private torch API, loaded only when used

    bad = set(CheckFunctionManager.UNSUPPORTED_SERIALIZATION_GUARD_TYPES)
    return [not (g.is_global or g.guard_type in bad or bad & set(g.derived_guard_types or ())) for g in entries]


def traced_sources(fn: Any) -> dict[str, str]:
    """{module: sha256 of its source} for every module whose code the AOT-compiled function traced."""
    info = fn.source_info()
    return {
        s.module: hashlib.sha256(s.content.encode()).hexdigest()
        for s in sorted(info.inlined_sources, key=lambda s: s.module)
    }


def aot_bytes(fn: Any) -> bytes:
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "fn.bin"
        fn.save_compiled_function(str(p))
        return p.read_bytes()
