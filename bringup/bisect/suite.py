"""bisect, registered as a capability: the command itself is a tool (args.TOOLS, cli.py plans its rounds); the
suite carries what the report needs: its section and tile for a bisection's run (shown on runs that have
bisect cases only: not part of `bringup run`)."""

from __future__ import annotations

from bringup.api import register_capability
from bringup.bisect import args as face
from bringup.bisect import section

register_capability(face, title="Bisection", section=section.render, tile=section.tile, page_data=section.page_data)
