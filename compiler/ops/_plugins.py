"""Loading plug-ins: Python modules that register user ops, before a model is imported.

Two ways in: ``graphtune --plugin mypkg.ops ...`` (any command; repeatable; a
module name, ``module:function``, or a Python file's path) and
the entry-point group ``graphtune.ops`` of an installed package::

    [project.entry-points."graphtune.ops"]
    myops = "mypkg.ops"            # a module: importing it registers its ops
    more = "mypkg.more:register"   # or a function, called with no arguments

The modules named with ``--plugin`` are also put in the environment variable
``GRAPHTUNE_PLUGINS`` (comma-separated), so processes started later (Ray
workers) load them when they first meet an op type they do not know. A plug-in
that raises (or calls ``sys.exit``) is one :class:`~compiler.ops.OpError` line
naming it.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from compiler.ops._registry import OpError, _one_line

__all__ = ["ENTRY_POINT_GROUP", "ENV_VAR", "load_from_environment", "load_plugins"]

ENTRY_POINT_GROUP = "graphtune.ops"
ENV_VAR = "GRAPHTUNE_PLUGINS"
_LOCK = threading.RLock()
_LOADED: set[str] = set()
_ENV_DONE = False


def _load_one(spec: str, what: str) -> None:
    if spec in _LOADED:
        return
    if _is_file(spec):
        module_name, func = spec, ""
    else:
        module_name, _, func = spec.partition(":")
    try:
        module = _import(module_name)
        if func:
            getattr(module, func)()
    except OpError as exc:
        raise OpError(f"plug-in {what} {spec}: {exc}") from None
    except (Exception, SystemExit) as exc:
        text = (f"it called sys.exit({exc.code!r})" if isinstance(exc, SystemExit)
                else _one_line(exc))
        raise OpError(f"plug-in {what} {spec} failed: {text}") from None
    _LOADED.add(spec)


def _is_file(spec: str) -> bool:
    return spec.endswith(".py") or os.sep in spec


def _import(name: str) -> Any:
    """A module by dotted name, or a Python file by path (``ops/swish.py``)."""
    if not _is_file(name):
        return importlib.import_module(name)
    path = Path(name)
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {name}")
    mod_name = "graphtune_plugin_" + "".join(c if c.isalnum() else "_" for c in path.stem)
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {name}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(mod_name, None)
        raise
    return module


def load_plugins(modules: Iterable[str] = (), entry_points: bool = True,
                 export: bool = False) -> None:
    """Import the plug-in ``modules`` (``module`` or ``module:function``) and the entry points.

    Args:
        modules: What ``--plugin`` names.
        entry_points: Also load every ``graphtune.ops`` entry point.
        export: Add ``modules`` to ``GRAPHTUNE_PLUGINS`` for child processes.

    Raises:
        OpError: a plug-in does not import, raises, or registers a bad op.
    """
    mods = [os.path.abspath(m.strip()) if _is_file(m.strip()) else m.strip()
            for m in modules if m.strip()]
    with _LOCK:
        if entry_points:
            from importlib.metadata import entry_points as eps

            for ep in eps(group=ENTRY_POINT_GROUP):
                _load_one(ep.value, f"(entry point {ep.name})")
        for m in mods:
            _load_one(m, "module")
        if export and mods:
            have = [x for x in os.environ.get(ENV_VAR, "").split(",") if x]
            os.environ[ENV_VAR] = ",".join(dict.fromkeys([*have, *mods]))


def load_from_environment() -> bool:
    """Load ``GRAPHTUNE_PLUGINS`` and the entry points once per process; whether it ran now."""
    global _ENV_DONE
    with _LOCK:
        if _ENV_DONE:
            return False
        _ENV_DONE = True
        load_plugins(os.environ.get(ENV_VAR, "").split(","))
        return True
