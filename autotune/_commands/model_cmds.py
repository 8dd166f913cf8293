"""``graphtune zoo`` and ``graphtune info``."""

from __future__ import annotations

import click


def register(group: click.Group) -> None:
    """Attach this module's commands."""
