"""Finding a measurer by name: ``module:Class``, an entry point, or a built-in name.

A package plugs a measurer in by declaring an entry point in the group
``graphtune.measurers`` (name -> ``module:Class``)::

    [project.entry-points."graphtune.measurers"]
    board = "my_board.runner:BoardMeasurer"

after which ``graphtune tune --measurer board`` finds it; ``--measurer
my_board.runner:BoardMeasurer`` works without installing anything but the
module. ``sim`` (the default) and ``delayed`` (:class:`DelayedMeasurer`) are
built in. Options reach the class's constructor as keyword arguments; on the
command line ``--measurer-arg KEY=VALUE`` (the value is read as JSON when it
parses, else as a string).

Every problem (unknown name, module that does not import, not a
:class:`Measurer` subclass, constructor that fails) is one
:class:`GraphtuneError` line.
"""

from __future__ import annotations

import importlib
import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from autotune.measure._measurer import Measurer
from compiler.errors import GraphtuneError

__all__ = ["ENTRY_POINT_GROUP", "load_measurer", "measurer_names", "parse_key_values",
           "parse_resources"]

ENTRY_POINT_GROUP = "graphtune.measurers"
_RESOURCE_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,200}")
_BUILTIN = {"sim": "autotune.measure._measurer:SimMeasurer",
            "delayed": "autotune.measure._delayed:DelayedMeasurer"}


def measurer_names() -> dict[str, str]:
    """Measurers known by name: the built-in ones and every installed entry point."""
    from importlib.metadata import entry_points

    names = dict(_BUILTIN)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        names.setdefault(ep.name, ep.value)
    return names


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):  # sys.exit() in a plugin must not end graphtune silently
        return f"it called sys.exit({exc.code!r})"
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    return f"{type(exc).__name__}: {lines[-1]}" if lines else type(exc).__name__


def _resolve(spec: str) -> type:
    """The class a spec names (see the module doc)."""
    target = spec if ":" in spec else measurer_names().get(spec)
    if target is None:
        known = ", ".join(sorted(measurer_names()))
        raise GraphtuneError(f"unknown measurer {spec!r}: give MODULE:CLASS or one of {known} "
                             f"(entry points of {ENTRY_POINT_GROUP})")
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise GraphtuneError(f"measurer {spec!r}: expected MODULE:CLASS, e.g. "
                             "autotune:DelayedMeasurer")
    try:
        module = importlib.import_module(module_name)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - a plugin's import can raise anything
        raise GraphtuneError(f"measurer {spec!r}: cannot import {module_name} "
                             f"({_one_line(exc)})") from None
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise GraphtuneError(f"measurer {spec!r}: {module_name} has no {attr!r}")
        obj = getattr(obj, part)
    if not (isinstance(obj, type) and issubclass(obj, Measurer)):
        raise GraphtuneError(f"measurer {spec!r}: {attr} is not a subclass of "
                             "autotune.Measurer")
    if getattr(obj, "__abstractmethods__", None):
        raise GraphtuneError(f"measurer {spec!r}: {attr} does not implement "
                             f"{', '.join(sorted(obj.__abstractmethods__))}")
    return obj


def load_measurer(spec: str, options: Mapping[str, Any] | None = None) -> Measurer:
    """An instance of the measurer ``spec`` names, built with ``options`` as keyword arguments.

    Args:
        spec: ``module:Class`` (``my_pkg.board:Runner``) or a name (``sim``, ``delayed``,
            an entry point of the ``graphtune.measurers`` group).
        options: Keyword arguments of its constructor.

    Raises:
        GraphtuneError: unknown name, import failure, not a Measurer, or the constructor failed.

    Example:
        >>> m = load_measurer("delayed", {"delay_s": 0.2, "fail_rate": 0.1})
    """
    cls = _resolve(spec)
    kwargs = dict(options or {})
    try:
        measurer = cls(**kwargs)
    except GraphtuneError as exc:
        raise GraphtuneError(f"measurer {spec!r}: {exc}") from None
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - a plugin's constructor can raise anything
        args = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
        raise GraphtuneError(f"measurer {spec!r}: {cls.__name__}({args}) failed: "
                             f"{_one_line(exc)}") from None
    if not measurer.name or not measurer.version:
        raise GraphtuneError(f"measurer {spec!r}: {cls.__name__} must set name and version "
                             "(records name the measurer that produced them)")
    return measurer


def parse_key_values(items: Iterable[str], what: str) -> dict[str, Any]:
    """``["delay_s=0.2", "mode=fast"]`` -> ``{"delay_s": 0.2, "mode": "fast"}``.

    A value that parses as JSON is taken as such (numbers, booleans, lists,
    objects); anything else is a string.

    Raises:
        GraphtuneError: an item without ``=`` or with an empty key.
    """
    out: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise GraphtuneError(f"{what} wants KEY=VALUE with KEY a Python name, got {item!r}")
        try:
            out[key] = json.loads(text)
        except ValueError:
            out[key] = text
    return out


def parse_resources(items: Iterable[str]) -> dict[str, float]:
    """``["stcp920=1"]`` -> ``{"stcp920": 1.0}`` (``--worker-resource``).

    Raises:
        GraphtuneError: not NAME=AMOUNT with a positive amount.
    """
    out: dict[str, float] = {}
    for item in items:
        name, sep, text = item.partition("=")
        name = name.strip()
        try:
            amount = float(text)
        except ValueError:
            amount = -1.0
        if not sep or not _RESOURCE_NAME.fullmatch(name) or not 0 < amount < math.inf:
            raise GraphtuneError(f"--worker-resource wants NAME=AMOUNT with NAME letters, digits, "
                                 f"'_', '-', '.' or ':' and a finite AMOUNT > 0 (e.g. "
                                 f"stcp920=1), got {item!r}")
        if name in ("CPU", "GPU", "memory"):
            raise GraphtuneError(f"--worker-resource {item!r}: {name} is not a custom resource "
                                 "(use --worker-cpus for CPUs)")
        out[name] = amount
    return out
