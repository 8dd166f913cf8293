"""Old import paths of modules that moved, kept for one version with a DeprecationWarning.

A package lists its moved modules (old dotted path -> new dotted path) and calls
:func:`keep_old_paths` in its ``__init__``; importing an old path (or a submodule
under it) then warns and returns the very module object of the new path, so
``monkeypatch.setattr("old.path.name", ...)`` and ``isinstance`` keep working.
No file stays at the old path: a branch that edits the old file merges into the
moved one (git's rename detection needs the old path gone).

Example:
    >>> keep_old_paths({"autotune._guided": "autotune.sampling._guided"}, version="0.2")
    >>> import autotune._guided  # DeprecationWarning: moved to autotune.sampling._guided
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from collections.abc import Mapping, Sequence
from types import ModuleType

__all__ = ["keep_old_paths", "moved_paths"]


class _OldPathFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds old module paths and loads them as the module at the new path."""

    def __init__(self) -> None:
        self.moved: dict[str, str] = {}
        self.version: dict[str, str] = {}
        self._specs: dict[str, importlib.machinery.ModuleSpec | None] = {}

    def new_name(self, name: str) -> str | None:
        """The new path of ``name`` (itself moved, or a submodule of a moved package)."""
        if name in self.moved:
            return self.moved[name]
        head, _, _ = name.rpartition(".")
        while head:
            if head in self.moved:
                return f"{self.moved[head]}.{name[len(head) + 1:]}"
            head, _, _ = head.rpartition(".")
        return None

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if self.new_name(fullname) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = self.new_name(spec.name)
        assert new is not None
        old_root = next((o for o in self.moved if spec.name == o or spec.name.startswith(o + ".")),
                        spec.name)
        warnings.warn(f"{spec.name} moved to {new}; the old path goes after graphtune "
                      f"{self.version.get(old_root, 'the next version')}",
                      DeprecationWarning, stacklevel=2)
        module = importlib.import_module(new)
        # The import system sets __spec__ on the module it gets back: keep the real one.
        self._specs[module.__name__] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        spec = self._specs.pop(module.__name__, None)
        if spec is not None:
            module.__spec__ = spec


_FINDER = _OldPathFinder()


def keep_old_paths(moved: Mapping[str, str], version: str) -> None:
    """Let the old paths in ``moved`` import (with a DeprecationWarning) until after ``version``."""
    for old, new in moved.items():
        _FINDER.moved[old] = new
        _FINDER.version[old] = version
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


def moved_paths() -> dict[str, str]:
    """Every old path registered so far -> its new path."""
    return dict(_FINDER.moved)
