"""port's command-line face: `bringup port PATH...` is a tool (a command that plans no cases; its options
and main are in cli.py), listed here torch-free so that `bringup --help` offers it (bringup.api.tools)."""

from __future__ import annotations

from bringup.api import Tool

TOOLS = (Tool("port", "bringup.port.cli", "find CUDA-only code and rewrite it device-agnostic", device=False),)
