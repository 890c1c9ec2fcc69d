"""Environment shims, each with the reason it exists.

torchvision from PyPI is a CUDA build: next to a CPU-only torch its C++ ops library can't load, and
`import torchvision` then dies registering a fake kernel for `torchvision::nms` (an operator that was
never defined). transformers and timm import torchvision at module level, so every HF/timm model
would be unusable. When (and only when) that exact failure happens, we define the schemas of the two
operators torchvision registers unconditionally, so the pure-Python parts (layers, transforms) import.
Calling those ops still fails loudly: no kernel is provided.
"""

from __future__ import annotations

import atexit
import importlib.abc
import importlib.util
import logging
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

_SCHEMAS = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
)


_SHIM_LIB = "bringup._torchvision_shim_lib"


def _define_schemas() -> None:
    import torch  # lazy: torch-free --help

    lib = torch.library.Library("torchvision", "FRAGMENT")  # type: ignore[no-untyped-call]  # torch leaves it untyped
    for schema in _SCHEMAS:
        try:
            lib.define(schema)  # type: ignore[no-untyped-call]  # torch leaves it untyped
        except RuntimeError:  # already defined (a second call, or a partially loaded library)
            pass
    sys.modules[_SHIM_LIB] = lib  # type: ignore[assignment]  # keep it alive; its presence says "shimmed"


class _ShimLoader(importlib.abc.Loader):
    """torchvision's own loader; where its __init__ dies on exactly the failure above, the schemas are
    defined, its half-loaded submodules dropped, and its __init__ run again in the same module."""

    def __init__(self, real: importlib.abc.Loader) -> None:
        self.real = real

    def __getattr__(self, name: str) -> object:  # get_source, get_resource_reader, is_package...: the real one's
        return getattr(self.real, name)

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self.real.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        try:
            self.real.exec_module(module)
            return
        except RuntimeError as e:
            if "torchvision::nms" not in str(e):
                raise
        for name in [m for m in sys.modules if m.startswith("torchvision.")]:
            del sys.modules[name]
        _define_schemas()
        self.real.exec_module(module)


class _ShimFinder(importlib.abc.MetaPathFinder):
    """Answers for `torchvision` (transformers' and timm's imports, and their find_spec probes) with its
    real spec whose loader is wrapped in _ShimLoader. A process that never imports torchvision never pays
    for it: importing it imports torch._dynamo, ~2.5 s of CPU in every command that plans a run."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname != "torchvision":
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and not isinstance(spec.loader, _ShimLoader):
                    spec.loader = _ShimLoader(spec.loader)
                return spec
        return None


def install_torchvision_shim() -> None:
    """Make a later `import torchvision` survive the CPU-torch + CUDA-torchvision case (above), lazily."""
    if "torchvision" in sys.modules or any(isinstance(f, _ShimFinder) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _ShimFinder())


def ensure_torchvision_importable() -> str:
    """Import torchvision now: 'absent' | 'ok' | 'shimmed' (the CPU-torch + CUDA-torchvision case above)."""
    if "torchvision" not in sys.modules and importlib.util.find_spec("torchvision") is None:
        return "absent"
    install_torchvision_shim()
    import torchvision  # noqa: F401

    return "shimmed" if _SHIM_LIB in sys.modules else "ok"


# Import-time warnings of optional packages that say nothing about the user's run. transformers
# imports torchao whenever it is installed (its quantizer registry); torchao then logs "Failed to load
# .../_C_mxfp8...so" for each CUDA-only extension it ships (on a cpu build they can't load, by design),
# and registers enums with torch's pytree, which torch >= 2.12 logs as deprecated. Every command that
# touches a model printed four such lines before its own output, and a bad input no longer ended in
# one line. Only these two loggers, only below ERROR; probe reports what torchao can really do.
_NOISY_IMPORT_LOGGERS = ("torchao", "torch.utils._pytree")


def quiet_import_noise() -> None:
    for name in _NOISY_IMPORT_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)


# transformers >= 5.25 with `kernels` (its new dependency) turns some module-level functions into module
# instances (`@use_kernel_forward_from_hub("rotary_pos_emb") def apply_rotary_pos_emb`): each an instance
# of a class made inside `kernels`' `_create_func_module`, so named `_create_func_module.<locals>.Func`.
# dynamo records the class in every traced node's nn_module_stack and guards the instance's type, and an
# ahead-of-time compile pickles both: `Can't pickle local object '_create_func_module.<locals>.Func'`, then
# "cannot be saved into torch.compile() package since it's defined in local scope", on every such model.
# Each class is made a top-level one of its model's module (`<module>.Func_<function name>`, what pickle
# and dynamo's guard serialization accept), before the compile and before a saved function is loaded (a new
# process makes the same class when it imports the model's module; this gives it the same name).
_LOCAL_FUNC = "_create_func_module.<locals>.Func"


def name_kernel_funcs() -> int:
    """Give every kernels Func class held by a loaded transformers module a top-level name; how many were
    newly named."""
    n = 0
    for mod_name, mod in list(sys.modules.items()):
        if not mod_name.startswith("transformers.models.") or mod is None:
            continue
        for name, obj in list(vars(mod).items()):
            cls = type(obj)
            if cls.__qualname__ == _LOCAL_FUNC:  # not yet named
                top = f"Func_{name}"
                cls.__module__, cls.__name__, cls.__qualname__ = mod_name, top, top
                setattr(mod, top, cls)
                n += 1
    return n


# torch's autograd engine runs the backward of a non-cpu device on a device thread (one per index), and
# torch 2.13 and 2.14 (not 2.7 nor 2.9) stash a Python object (a contextvars context) in the thread-local
# state that every graph task copies. The device thread can drop the last reference to a finished graph
# task after backward() has returned on the main thread; when that is during interpreter finalization, its
# GIL acquire exits the thread by a forced unwind through a noexcept destructor: std::terminate ("terminate
# called without an active exception", exit -6 / 134) after every result was written. Seen in CI on
# testdev (a tiny backward then exit: 35 of 40 runs pinned to one core). At exit, while Python is still
# whole, one tiny backward per device thread through the engine itself (no Python object in its graph
# task) runs only after that thread finished the loop iteration, and so dropped the graph task, of
# everything queued before it. Its tensors are kept alive to the end (a leaked reference): none of their
# releases can fall to a device thread.
_DRAIN: set[tuple[str, int | None]] = set()
_DRAIN_KEEP: list[object] = []


def drain_autograd_threads_at_exit(device_type: str, index: int | None = None) -> None:
    """At exit, wait for the autograd device thread that serves `device_type:index` (None: the current
    index) to finish every backward queued before exit (above). Idempotent; a no-op for cpu and meta."""
    if device_type in ("cpu", "meta"):
        return
    if not _DRAIN:
        import ctypes  # lazy: fast --help

        ctypes.pythonapi.Py_IncRef(ctypes.py_object(_DRAIN_KEEP))
        atexit.register(_drain_autograd_threads)
    _DRAIN.add((device_type, index))


def _drain_autograd_threads() -> None:
    import torch  # lazy: torch-free --help

    engine = torch.autograd.Variable._execution_engine
    for device_type, index in sorted(_DRAIN, key=str):
        try:
            is_initialized = getattr(torch.get_device_module(device_type), "is_initialized", None)
        except Exception:
            is_initialized = None
        if callable(is_initialized) and not is_initialized():
            continue  # never initialized in this process: no backward ran there, and none is started now
        try:
            with torch.enable_grad():
                x = torch.zeros((), dtype=torch.float32, device=torch.device(device_type, index), requires_grad=True)  # type: ignore[arg-type]  # index None: the current one
                y, grad = x * 1, torch.ones((), dtype=torch.float32, device=x.device)
                _DRAIN_KEEP.extend((x, y, grad))
                engine.run_backward((y,), (grad,), False, False, (), True, True)
        except Exception:  # a finished run's exit must not end in a traceback; the drain is best effort
            pass
