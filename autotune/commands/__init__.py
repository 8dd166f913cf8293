"""CLI subcommands, one module per concern; each has ``register(group)``.

Owns the ``graphtune`` subcommands (``*_cmds``) and their shared helpers
(:mod:`._common`). May import everything: it is the top of the project. Nothing
but :mod:`autotune.cli` imports it.
"""

from __future__ import annotations

import importlib

import click

_MODULES = ["model_cmds", "log_cmds", "schedule_cmds", "build_cmds", "sim_cmds", "space_cmds",
            "tune_cmds", "dashboard_cmds"]


def register_all(group: click.Group) -> None:
    """Attach every subcommand module's commands to ``group``."""
    for name in _MODULES:
        importlib.import_module(f"autotune.commands.{name}").register(group)
