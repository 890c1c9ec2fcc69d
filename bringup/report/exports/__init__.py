"""A run as the files other tools read (`bringup export --format F`, docs/ecosystem.md): PyTorch's benchmark
database records (benchmark.py), a per-op support table (support.py), `set_test_configs` for PyTorch's
device-generic tests (pytorch_tests.py). Each reads a run and its results only (the store's or a bundle's)."""
