"""``GraphSchedule``: the one value type every graphtune package speaks.

A schedule says, for one graph at one batch size:

* ``groups``: single-output op sets (stored as inclusive ranges of topological
  op indices), each with ``split``: the number of chunks it is cut into along the
  batch (the vendor's ``SplitGroups`` factor: 16 images split 8 = chunks of 2);
* for every chunk its output placement: ``mem_scope`` (``DDR``/``LLB``/``L1``)
  and ``core_bind`` — parts of cores, the chunk's samples divided evenly over
  the parts: ``[[0,1,2,3],[4,5,6,7]]`` = two samples on four cores each, the flat
  ``[3,7,2,6,1,5,0,4]`` = one part per core;
* ``transfers``: the ``split``/``concat`` steps that re-chunk a tensor between a
  producer and a consumer with different split factors, each with its own
  placement (as the guide's ``ScheduleInfo(ops["concatenate"][0], ...)``);
* ``order``: the execution order of every group chunk and transfer.

It is frozen and JSON round-trippable (``to_json``/``from_json``, schema
version :data:`SCHEMA_VERSION`). :meth:`GraphSchedule.validate` checks the
structure against a :class:`~compiler.graph.Graph` and a
:class:`~compiler.target.Target` and says precisely what is wrong. Capacity is
not checked here: that needs lifetimes, which is the simulator's job.
"""

from __future__ import annotations

import enum
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from compiler.errors import ScheduleError

if TYPE_CHECKING:
    from compiler.graph import Graph
    from compiler.target import Target

SCHEMA_VERSION = 1
KIND = "graphtune.GraphSchedule"


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


@dataclass(frozen=True)
class GraphSchedule:
    """A complete graph schedule. Frozen; JSON round-trippable; see the module doc."""

    batch: int
    groups: tuple[GroupSpec, ...]
    transfers: tuple[Transfer, ...]
    order: tuple[Step, ...]
    workload_key: str | None = None
    source: str = ""  # who made it: "O3", "resnet50_schedule", "tuner:study/trial"
    version: int = SCHEMA_VERSION

    # ---- lookup ----------------------------------------------------------------------
    def group(self, name: str) -> GroupSpec:
        """A group by name."""
        for g in self.groups:
            if g.name == name:
                return g
        raise ScheduleError(f"no group named {name!r}")

    def transfer(self, name: str) -> Transfer:
        """A transfer by name."""
        for t in self.transfers:
            if t.name == name:
                return t
        raise ScheduleError(f"no transfer named {name!r}")

    def group_of_op(self) -> dict[int, str]:
        """Op index -> group name."""
        return {i: g.name for g in self.groups for i in g.ops}

    def structural_key(self) -> tuple[Any, ...]:
        """What the schedule does, without its labels: equal keys = the same schedule.

        Groups are identified by their ops (named by their first op index in the
        order), so renaming a group, the ``source`` and the ``workload_key`` do not
        change the key; everything that changes execution does. Hashable.
        """
        first = {g.name: min(g.ops) if g.ops else -1 for g in self.groups}
        groups = tuple(sorted(((g.ops, g.split, g.chunks) for g in self.groups),
                              key=lambda x: x[0]))
        transfers = tuple(sorted(
            ((t.name, t.kind, t.tensor, t.src_factor, t.dst_factor, t.src_chunks, t.dst_chunks,
              t.placement) for t in self.transfers), key=lambda x: x[0]))
        order = tuple((first.get(s.name, s.name), s.chunk) if s.kind == "group" else s.name
                      for s in self.order)
        return (self.batch, groups, transfers, order)

    # ---- JSON --------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """Keyed JSON object (never positional arrays at the top level)."""
        return {
            "kind": KIND,
            "v": self.version,
            "batch": self.batch,
            "workload_key": self.workload_key,
            "source": self.source,
            "groups": [g.to_json() for g in self.groups],
            "transfers": [t.to_json() for t in self.transfers],
            "order": [s.to_json() for s in self.order],
        }

    def dumps(self, indent: int | None = None) -> str:
        """JSON text."""
        return json.dumps(self.to_json(), indent=indent)

    @classmethod
    def from_json(cls, d: Any) -> GraphSchedule:
        """Parse and check the JSON layout (not the graph: see :meth:`validate`).

        The layout is checked against the bounded JSON Schema
        :data:`compiler._schedule_schema.SCHEDULE_SCHEMA` before anything is
        built from it, so any malformed input is a one-line ScheduleError in
        bounded time and memory.
        """
        from compiler._json_schema import short
        from compiler._schedule_schema import check_schedule_json

        if not isinstance(d, dict):
            raise ScheduleError("a schedule must be a JSON object")
        if d.get("kind", KIND) != KIND:
            raise ScheduleError(f"not a graph schedule (kind={short(d.get('kind'))})")
        version = _int(_get(d, "v", "schedule"), "schedule version")
        if version > SCHEMA_VERSION:
            raise ScheduleError(
                f"schedule version {version} is newer than this graphtune ({SCHEMA_VERSION}): "
                "upgrade graphtune"
            )
        check_schedule_json(d)
        return cls(
            batch=_int(_get(d, "batch", "schedule"), "schedule: batch"),
            groups=tuple(GroupSpec.from_json(g) for g in d["groups"]),
            transfers=tuple(Transfer.from_json(t) for t in d["transfers"]),
            order=tuple(Step.from_json(s) for s in d["order"]),
            workload_key=d.get("workload_key"),
            source=str(d.get("source", "")),
            version=version,
        )

    @classmethod
    def loads(cls, text: str | bytes) -> GraphSchedule:
        """Parse JSON text (see :meth:`from_json`).

        Raises:
            ScheduleError: Not JSON, too large or too deeply nested, or malformed.
        """
        from compiler._schedule_schema import MAX_SCHEDULE_BYTES

        if len(text) > MAX_SCHEDULE_BYTES:
            raise ScheduleError(f"schedule is larger than {MAX_SCHEDULE_BYTES >> 20} MiB")
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ScheduleError(f"schedule is not valid JSON: {exc}") from None
        except UnicodeDecodeError:
            raise ScheduleError("schedule is not JSON text (not UTF-8)") from None
        except ValueError as exc:  # e.g. an integer of more than 4300 digits
            raise ScheduleError(f"schedule is not valid JSON: {str(exc)[:120]}") from None
        except RecursionError:
            raise ScheduleError("schedule is not valid JSON: nested too deeply") from None
        return cls.from_json(data)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> GraphSchedule:
        """Read a schedule file (at most ``MAX_SCHEDULE_BYTES``, a regular file or pipe)."""
        from compiler._schedule_schema import MAX_SCHEDULE_BYTES
        from compiler.files import read_bounded

        data = read_bounded(path, "schedule file", MAX_SCHEDULE_BYTES, ScheduleError)
        try:
            return cls.loads(data)
        except ScheduleError as exc:
            raise ScheduleError(f"{os.fspath(path)}: {exc}") from None

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write atomically (:func:`compiler.files.write_atomic`)."""
        from compiler.files import write_atomic

        write_atomic(path, (self.dumps(indent=1) + "\n").encode())

    # ---- validation ------------------------------------------------------------------
    def validate(self, graph: Graph, target: Target | None = None) -> None:
        """Raise :class:`ScheduleError` naming the first structural problem found."""
        from compiler._validate import validate_schedule

        validate_schedule(self, graph, target)

    def is_valid(self, graph: Graph, target: Target | None = None) -> bool:
        """Whether :meth:`validate` passes."""
        try:
            self.validate(graph, target)
        except ScheduleError:
            return False
        return True


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
