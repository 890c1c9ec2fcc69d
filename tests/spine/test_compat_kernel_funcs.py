"""bringup.compat.name_kernel_funcs: transformers >= 5.25 with `kernels` holds module instances of classes
made inside a function (`_create_func_module.<locals>.Func`), which neither pickle nor dynamo's guard
serialization accept; each is named a top-level class of its model's module, once."""

from __future__ import annotations

import pickle
import sys
import types

from bringup.compat import _LOCAL_FUNC, name_kernel_funcs


def _make_func_module() -> type:
    class Func:  # what kernels' _create_func_module makes
        pass

    Func.__qualname__ = _LOCAL_FUNC
    return Func


def test_a_local_kernel_func_class_gets_a_picklable_top_level_name(monkeypatch) -> None:
    mod = types.ModuleType("transformers.models.fake.modeling_fake")
    cls = _make_func_module()
    mod.apply_rotary_pos_emb = cls()
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    try:
        pickle.dumps(cls)
        raise AssertionError("a local class pickled: this test no longer shows the failure it is about")
    except (AttributeError, pickle.PicklingError):
        pass
    assert name_kernel_funcs() >= 1  # ours, and those of any real transformers module loaded in this process
    assert cls.__qualname__ == cls.__name__ == "Func_apply_rotary_pos_emb" and cls.__module__ == mod.__name__
    assert mod.Func_apply_rotary_pos_emb is cls and pickle.loads(pickle.dumps(cls)) is cls
    assert name_kernel_funcs() == 0  # named once
