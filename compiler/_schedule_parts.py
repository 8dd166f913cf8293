"""The parts of a :class:`compiler.schedule.GraphSchedule`: placements, groups, transfers, steps.

Apart from :mod:`compiler.schedule` so that deriving transfers and orders
(:mod:`compiler.derive`), which ``GraphSchedule.validate`` uses, needs only the parts,
not the schedule; :mod:`compiler.schedule` re-exports every public name here.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from compiler.errors import ScheduleError

__all__ = [
    "SCOPES",
    "CoreBind",
    "GroupSpec",
    "NPUMemScope",
    "Placement",
    "ScheduleLike",
    "Step",
    "Transfer",
    "core_bind_json",
    "normalize_core_bind",
    "scope_name",
]


class NPUMemScope(enum.IntEnum):
    """Where an output lives: the guide's ``NPUMemScope.{DDR,LLB,L1}`` (slow to fast)."""

    DDR = 0
    LLB = 1
    L1 = 2


SCOPES = ("DDR", "LLB", "L1")


def scope_name(scope: NPUMemScope | str | int) -> str:
    """Normalise a scope given as enum, name or int to its name."""
    if isinstance(scope, NPUMemScope):
        return scope.name
    if isinstance(scope, int):
        return NPUMemScope(scope).name
    name = str(scope).upper()
    if name.startswith("NPUMEMSCOPE."):
        name = name.split(".", 1)[1]
    if name not in SCOPES:
        raise ScheduleError(f"unknown mem_scope {scope!r}: use DDR, LLB or L1")
    return name


CoreBind = tuple[tuple[int, ...], ...]


def normalize_core_bind(bind: Any) -> CoreBind:
    """``[[0,1],[2,3]]`` stays; a flat ``[3,7,2]`` becomes one part per core."""
    if hasattr(bind, "tolist"):
        bind = bind.tolist()
    if isinstance(bind, int):
        return ((int(bind),),)
    if not isinstance(bind, Sequence) or isinstance(bind, str) or not bind:
        raise ScheduleError(f"core_bind must be a non-empty list of cores or of core lists: {bind!r}")
    if all(isinstance(x, int) for x in bind):
        return tuple((int(x),) for x in bind)
    parts: list[tuple[int, ...]] = []
    for part in bind:
        if isinstance(part, int):
            parts.append((int(part),))
        elif isinstance(part, Sequence) and part and all(isinstance(x, int) for x in part):
            parts.append(tuple(int(x) for x in part))
        else:
            raise ScheduleError(f"core_bind part must be a non-empty list of core ids: {part!r}")
    return tuple(parts)


def core_bind_json(bind: CoreBind) -> list[Any]:
    """Flat list when every part is one core (the guide's spelling), nested otherwise."""
    if all(len(p) == 1 for p in bind):
        return [p[0] for p in bind]
    return [list(p) for p in bind]


@dataclass(frozen=True)
class Placement:
    """Where one chunk's output lives and which cores compute it."""

    mem_scope: str
    core_bind: CoreBind

    @classmethod
    def make(cls, mem_scope: NPUMemScope | str | int, core_bind: Any) -> Placement:
        """Build from the guide's spellings."""
        return cls(scope_name(mem_scope), normalize_core_bind(core_bind))

    @property
    def cores(self) -> tuple[int, ...]:
        """Distinct cores used, in order of first appearance."""
        return tuple(dict.fromkeys(c for part in self.core_bind for c in part))

    def to_json(self) -> dict[str, Any]:
        """Keyed JSON."""
        return {"mem_scope": self.mem_scope, "core_bind": core_bind_json(self.core_bind)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Placement:
        """Inverse of :meth:`to_json`."""
        return cls.make(_get(d, "mem_scope", "placement"), _get(d, "core_bind", "placement"))


@dataclass(frozen=True)
class GroupSpec:
    """A single-output op set, split into ``split`` chunks along the batch."""

    name: str
    ops: tuple[int, ...]  # topological op indices, sorted
    split: int
    chunks: tuple[Placement, ...]

    def to_json(self) -> dict[str, Any]:
        """Keyed JSON; ops as inclusive index ranges."""
        return {
            "name": self.name,
            "ops": _to_ranges(self.ops),
            "split": self.split,
            "chunks": [c.to_json() for c in self.chunks],
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> GroupSpec:
        """Inverse of :meth:`to_json`."""
        name = str(_get(d, "name", "group"))
        chunks = _get(d, "chunks", f"group {name}")
        if not isinstance(chunks, list):
            raise ScheduleError(f"group {name}: chunks must be a list")
        return cls(
            name=name,
            ops=_from_ranges(_get(d, "ops", f"group {name}"), name),
            split=_int(_get(d, "split", f"group {name}"), f"group {name}: split"),
            chunks=tuple(Placement.from_json(c) for c in chunks),
        )


@dataclass(frozen=True)
class Transfer:
    """A ``split`` or ``concat`` step re-chunking ``tensor`` between two split factors."""

    name: str
    kind: str  # "split" | "concat"
    tensor: str
    src_factor: int
    dst_factor: int
    src_chunks: tuple[int, ...]
    dst_chunks: tuple[int, ...]
    placement: Placement

    def to_json(self) -> dict[str, Any]:
        """Keyed JSON."""
        return {
            "name": self.name,
            "kind": self.kind,
            "tensor": self.tensor,
            "src_factor": self.src_factor,
            "dst_factor": self.dst_factor,
            "src_chunks": list(self.src_chunks),
            "dst_chunks": list(self.dst_chunks),
            **self.placement.to_json(),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Transfer:
        """Inverse of :meth:`to_json`."""
        name = str(_get(d, "name", "transfer"))
        where = f"transfer {name}"
        kind = str(_get(d, "kind", where))
        if kind not in ("split", "concat"):
            raise ScheduleError(f"{where}: kind must be split or concat, got {kind!r}")
        return cls(
            name=name,
            kind=kind,
            tensor=str(_get(d, "tensor", where)),
            src_factor=_int(_get(d, "src_factor", where), f"{where}: src_factor"),
            dst_factor=_int(_get(d, "dst_factor", where), f"{where}: dst_factor"),
            src_chunks=tuple(_int(x, where) for x in _get(d, "src_chunks", where)),
            dst_chunks=tuple(_int(x, where) for x in _get(d, "dst_chunks", where)),
            placement=Placement.from_json(d),
        )


@dataclass(frozen=True)
class Step:
    """One entry of the execution order: a group chunk or a transfer."""

    kind: str  # "group" | "transfer"
    name: str
    chunk: int = 0

    def to_json(self) -> list[Any]:
        """Compact JSON: ``["g", name, chunk]`` or ``["t", name]``."""
        return ["g", self.name, self.chunk] if self.kind == "group" else ["t", self.name]

    @classmethod
    def from_json(cls, d: Any) -> Step:
        """Inverse of :meth:`to_json`."""
        if isinstance(d, list) and d and d[0] == "g" and len(d) == 3:
            return cls("group", str(d[1]), _int(d[2], "order entry"))
        if isinstance(d, list) and d and d[0] == "t" and len(d) == 2:
            return cls("transfer", str(d[1]))
        raise ScheduleError(f"order entry must be ['g', group, chunk] or ['t', transfer]: {d!r}")

    def __str__(self) -> str:
        return f"{self.name}[{self.chunk}]" if self.kind == "group" else self.name


def _get(d: Any, key: str, where: str) -> Any:
    if not isinstance(d, dict) or key not in d:
        raise ScheduleError(f"{where}: missing key {key!r}")
    return d[key]


def _int(v: Any, where: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ScheduleError(f"{where} must be an integer, got {v!r}")
    return v


def _to_ranges(indices: Iterable[int]) -> list[list[int]]:
    out: list[list[int]] = []
    for i in sorted(indices):
        if out and out[-1][1] == i - 1:
            out[-1][1] = i
        else:
            out.append([i, i])
    return out


def _from_ranges(ranges: Any, name: str) -> tuple[int, ...]:
    if not isinstance(ranges, list):
        raise ScheduleError(f"group {name}: ops must be a list of [first, last] index ranges")
    out: list[int] = []
    for r in ranges:
        if (
            not isinstance(r, list)
            or len(r) != 2
            or not all(isinstance(x, int) and not isinstance(x, bool) for x in r)
            or r[0] > r[1]
            or r[0] < 0
        ):
            raise ScheduleError(f"group {name}: bad op range {r!r}: use [first, last]")
        out.extend(range(r[0], r[1] + 1))
    return tuple(out)


class ScheduleLike(Protocol):
    """A schedule as deriving and validating read it: a ``GraphSchedule``."""

    @property
    def batch(self) -> int: ...

    @property
    def groups(self) -> tuple[GroupSpec, ...]: ...

    @property
    def transfers(self) -> tuple[Transfer, ...]: ...

    @property
    def order(self) -> tuple[Step, ...]: ...

    @property
    def workload_key(self) -> str | None: ...


# Their public path is compiler.schedule (which re-exports them): docs, reprs of the
# classes and pickles name it.
for _cls in (NPUMemScope, Placement, GroupSpec, Transfer, Step):
    _cls.__module__ = "compiler.schedule"
del _cls
