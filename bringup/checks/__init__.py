"""Checks: small functions that judge what a case produced (parity, fallbacks, graphs, loss curves)."""
