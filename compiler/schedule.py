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

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

# The parts are defined in compiler._schedule_parts; their public path is this module.
from compiler._schedule_parts import SCOPES as SCOPES
from compiler._schedule_parts import CoreBind as CoreBind
from compiler._schedule_parts import GroupSpec as GroupSpec
from compiler._schedule_parts import NPUMemScope as NPUMemScope
from compiler._schedule_parts import Placement as Placement
from compiler._schedule_parts import Step as Step
from compiler._schedule_parts import Transfer as Transfer
from compiler._schedule_parts import _get, _int
from compiler._schedule_parts import core_bind_json as core_bind_json
from compiler._schedule_parts import normalize_core_bind as normalize_core_bind
from compiler._schedule_parts import scope_name as scope_name
from compiler.derive import _breadth, derive_transfers, group_order, postorder
from compiler.errors import ScheduleError
from compiler.memo import memo_of

if TYPE_CHECKING:
    from compiler.graph import Graph
    from compiler.target import Target

SCHEMA_VERSION = 1
KIND = "graphtune.GraphSchedule"


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


def make_schedule(
    graph: Graph,
    groups: Sequence[GroupSpec],
    *,
    order: str | Sequence[Step] = "depth",
    transfer_placements: dict[str, Placement] | None = None,
    source: str = "",
) -> GraphSchedule:
    """Complete a schedule from its groups: derive transfers, pick an order.

    Args:
        graph: the model's graph (fixes the batch and the workload key).
        groups: the groups, with split factors and one placement per chunk.
        order: ``"depth"`` (DFS post-order of the chunk DAG, as the guide's ResNet-50
            plan: each consumer chunk runs as soon as its inputs exist), ``"breadth"``
            (group by group, all chunks of one group before the next), or an
            explicit list of steps.
        transfer_placements: placements for transfers by derived name
            (``concat_0``), overriding the defaults.
        source: provenance label stored in the schedule.
    """
    group_order(graph, groups)  # cycle check with a readable message
    transfers, deps, outs = derive_transfers(graph, groups)
    if transfer_placements:
        unknown = set(transfer_placements) - {t.name for t in transfers}
        if unknown:
            raise ScheduleError(f"no transfer named {sorted(unknown)[0]!r} in this schedule")
        transfers = [
            Transfer(t.name, t.kind, t.tensor, t.src_factor, t.dst_factor, t.src_chunks,
                     t.dst_chunks, transfer_placements.get(t.name, t.placement))
            for t in transfers
        ]
    if isinstance(order, str):
        if order == "depth":
            nodes = postorder(deps, outs)
        elif order == "breadth":
            nodes = _breadth(graph, groups, deps)
        else:
            raise ScheduleError(f"unknown order {order!r}: use depth or breadth")
        steps = tuple(Step("group", n[1], n[2]) if n[0] == "g" else Step("transfer", n[1])
                      for n in nodes)
    else:
        steps = tuple(order)
    schedule = GraphSchedule(
        batch=graph.batch,
        groups=tuple(groups),
        transfers=tuple(transfers),
        order=steps,
        workload_key=graph.workload_key,
        source=source,
    )
    # Derived once: validation and the capacity walk reuse it (placements do not change it).
    memo_of(schedule, limit=8)[("derived", id(graph))] = (graph, (transfers, deps, outs))
    return schedule


def single_group_schedule(
    graph: Graph, placement: Placement, split: int = 1, source: str = ""
) -> GraphSchedule:
    """Every op in one group: the simplest valid schedule (handy in tests)."""
    g = GroupSpec("group_0", tuple(range(len(graph.ops))), split, (placement,) * split)
    return make_schedule(graph, [g], source=source)
