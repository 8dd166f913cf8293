"""Modules and names that moved keep their old import path for one version, with a warning."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import autotune  # registers autotune's old paths
import sim  # registers sim's
from compiler.moved import moved_paths


def _import_fresh(name: str) -> object:
    """Import ``name`` as if for the first time in this process (the warning is on import)."""
    for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
        del sys.modules[key]
    return importlib.import_module(name)


@pytest.mark.parametrize("old", sorted(moved_paths()))
def test_old_module_path_warns_and_is_the_new_module(old: str) -> None:
    new = moved_paths()[old]
    with pytest.warns(DeprecationWarning, match=rf"{old} moved to {new}"):
        mod = _import_fresh(old)
    assert mod is importlib.import_module(new)
    assert mod.__name__ == new and mod.__spec__ is not None and mod.__spec__.name == new


def test_every_package_registers_its_moves() -> None:
    assert moved_paths()["sim._bound"] == "compiler.bound"
    assert moved_paths()["autotune._guided"] == "autotune.sampling._guided"
    assert sim.lower_bound is importlib.import_module("compiler.bound").lower_bound
    assert autotune.tune is importlib.import_module("autotune._tune").tune


def test_submodule_under_a_moved_package() -> None:
    with pytest.warns(DeprecationWarning, match="autotune._commands.tune_cmds moved to "
                                                "autotune.commands.tune_cmds"):
        mod = _import_fresh("autotune._commands.tune_cmds")
    assert mod is importlib.import_module("autotune.commands.tune_cmds")


def test_old_names_from_an_old_module() -> None:
    with pytest.warns(DeprecationWarning):
        _import_fresh("autotune._measurer")
    from autotune._measurer import SimMeasurer  # type: ignore[import-not-found]
    assert SimMeasurer is autotune.SimMeasurer
    with pytest.warns(DeprecationWarning):
        _import_fresh("sim._bound")
    from sim._bound import compulsory_ddr_bytes  # type: ignore[import-not-found]

    from compiler.bound import compulsory_ddr_bytes as new

    assert compulsory_ddr_bytes is new


def test_moved_functions_of_compiler_derive() -> None:
    import compiler.derive as derive
    from compiler.schedule import make_schedule, single_group_schedule

    with pytest.warns(DeprecationWarning, match="compiler.schedule.make_schedule"):
        assert derive.make_schedule is make_schedule
    with pytest.warns(DeprecationWarning, match="compiler.schedule.single_group_schedule"):
        assert derive.single_group_schedule is single_group_schedule
    with pytest.raises(AttributeError):
        derive.no_such_name  # noqa: B018


def test_new_paths_do_not_warn() -> None:
    """The project imports nothing by an old path (a fresh interpreter, warnings as errors)."""
    code = ("import autotune, autotune.cli, sim, cost_model, logs, search_space, compiler.bound; "
            "import autotune.commands, autotune.running._driver, autotune.running._ray_pool; "
            "from autotune.commands import register_all; import click; "
            "register_all(click.Group()); "
            "from logs._record import SCHEMA_VERSION, Status; import logs._status as st; "
            "assert (SCHEMA_VERSION, Status) == (st.SCHEMA_VERSION, st.Status)")
    proc = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c", code],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_entry_points_name_the_new_paths() -> None:
    from importlib.metadata import entry_points

    eps = {ep.name: ep.value for ep in entry_points(group="graphtune.measurers")}
    assert eps["sim"] == "autotune.measure._measurer:SimMeasurer"
    assert eps["delayed"] == "autotune.measure._delayed:DelayedMeasurer"
