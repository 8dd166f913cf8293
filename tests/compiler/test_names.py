"""Names a newcomer can tell apart: the lazy package exports resolve; no public class twice."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import compiler


def test_every_exported_name_resolves() -> None:
    for name in compiler.__all__:
        assert getattr(compiler, name) is not None, name


def test_no_two_public_classes_share_a_name() -> None:
    seen: dict[str, str] = {}
    for info in pkgutil.iter_modules(compiler.__path__):
        if info.name.startswith("_") or info.name in ("zoo",):
            continue
        mod = importlib.import_module(f"compiler.{info.name}")
        for name, obj in vars(mod).items():
            if name.startswith("_") or not inspect.isclass(obj) or obj.__module__ != mod.__name__:
                continue
            assert name not in seen, f"{name} in both {seen[name]} and {mod.__name__}"
            seen[name] = mod.__name__
    assert seen["GroupSpec"] == "compiler.schedule" and seen["Group"] == "compiler.graph_schedule"
