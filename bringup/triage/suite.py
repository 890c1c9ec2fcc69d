"""triage, registered as a capability: the command itself is a tool (args.TOOLS, cli.py runs its steps); the suite
carries the report's view of a triage's own run (its minifier and fullgraph cases: a generic table), shown on runs
that have triage cases only (not part of `bringup run`). Every run's bug block is post_run.py."""

from __future__ import annotations

from bringup.api import register_capability
from bringup.triage import args as face

register_capability(face, title="Triage")
