"""`bringup localize MODEL`: the first module, then the first aten op, where a device run leaves the
float64 reference (core.py), and a standalone repro of that op (repro.py). docs/localize.md."""
