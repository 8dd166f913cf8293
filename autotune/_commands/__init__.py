"""CLI subcommands, one module per concern; each has ``register(group)``."""

from __future__ import annotations

import importlib

import click

_MODULES = ["model_cmds", "log_cmds", "schedule_cmds", "build_cmds", "sim_cmds", "space_cmds",
            "tune_cmds", "dashboard_cmds", "sweep_cmds"]


def register_all(group: click.Group) -> None:
    """Attach every subcommand module's commands to ``group``."""
    for name in _MODULES:
        importlib.import_module(f"autotune._commands.{name}").register(group)
