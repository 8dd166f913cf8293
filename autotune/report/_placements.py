"""Placements as short text: ``[2, 4]`` core binds, a group's chunks compressed.

Shared by ``graphtune schedule show`` and the HTML report.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from compiler.schedule import Placement

__all__ = ["bind_shape", "chunk_summary"]


def bind_shape(placement: Placement) -> str:
    """The cores, as ``core_bind`` spells them, runs compressed: ``[[4-7], [0-3]]`` for two
    parts of four cores, ``[0-7]`` for eight single-core parts, ``[0, 2, 4-6]``."""
    parts = placement.core_bind
    if all(len(p) == 1 for p in parts):
        return f"[{_core_runs([p[0] for p in parts])}]"
    return "[" + ", ".join(f"[{_core_runs(list(p))}]" for p in parts) + "]"


def _core_runs(cores: list[int]) -> str:
    """``0-3, 6`` for 0, 1, 2, 3, 6 (ascending runs of three or more as ranges; order kept)."""
    out: list[str] = []
    i = 0
    while i < len(cores):
        j = i
        while j + 1 < len(cores) and cores[j + 1] == cores[j] + 1:
            j += 1
        if j - i >= 2:
            out.append(f"{cores[i]}-{cores[j]}")
        else:
            out.extend(str(c) for c in cores[i:j + 1])
        i = j + 1
    return ", ".join(out)


def chunk_summary(chunks: Sequence[Placement]) -> str:
    """Placements of a group's chunks, identical ones compressed: ``LLB [2, 4] x4 (0,2,4,6)``."""
    kinds: dict[tuple[str, str], list[int]] = {}
    for c, p in enumerate(chunks):
        kinds.setdefault((p.mem_scope, bind_shape(p)), []).append(c)
    if len(kinds) == 1:
        (scope, shape), idx = next(iter(kinds.items()))
        return f"{scope} {shape}" + (f" x{len(idx)}" if len(idx) > 1 else "")
    out = []
    for (scope, shape), idx in kinds.items():
        out.append(f"{scope} {shape} x{len(idx)} (chunks {_ranges(idx)})")
    return "; ".join(out)


def _ranges(idx: list[int]) -> str:
    runs: list[list[int]] = []
    for i in idx:
        if runs and runs[-1][-1] == i - 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) > 2 else ",".join(map(str, r)) for r in runs)
