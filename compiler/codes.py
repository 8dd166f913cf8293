"""Small integer codes for the values a schedule producer shares between its schedules.

A producer of many schedules (the search space's decoder) makes them from a few
shared values: group specs, the placements of split/concat transfers, order steps.
It interns those values in a :class:`ValueTable` it owns, and leaves beside each
schedule it makes (in the schedule's memo, :mod:`compiler.memo`; never in a field)
a :class:`ScheduleCodes` record: the code of each group, transfer and step, as
``int32`` arrays. A consumer that walks many schedules (the cost model's
featuriser) maps codes to its own tables with numpy instead of walking objects.

Codes are optional: a schedule without them (built by hand, loaded from JSON,
unpickled, or a ``dataclasses.replace`` copy) is as valid, and consumers must fall
back to its objects. A table only grows; its producer starts a new one when it is
:meth:`~ValueTable.full` (bounded memory), and codes are only meaningful with the
table they came from.

A producer may also hand out a :class:`LazySchedule`: a ``GraphSchedule`` whose
``groups``, ``transfers`` and ``order`` are built from its codes when first read, and
whose codes and identity text (:func:`compiler.key_text.key_text`) its
:class:`ScheduleSource` computes when first asked for. A candidate that is only
pre-checked, identified and featurised never builds its objects.

Example:
    >>> table = ValueTable()
    >>> key = ("g0", id(ops), 1, id(place))  # the producer keeps ops and place alive
    >>> g = table.group_code(key)
    >>> if g is None:
    ...     g = table.add_group(key, GroupSpec("g0", ops, 1, (place,)))
    >>> attach_codes(schedule, ScheduleCodes(table, groups, transfers, order))
    >>> codes_of(schedule).table is table
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from compiler.memo import keep_memo_inside, memo_of, peek_memo
from compiler.schedule import SCHEMA_VERSION, GraphSchedule, GroupSpec, Placement, Step

__all__ = ["LazySchedule", "ScheduleCodes", "ScheduleSource", "TransferItem", "ValueTable",
           "attach_codes", "codes_of"]

_KEY = "compiler.codes"
MAX_VALUES = 250_000  # per kind; a producer starts a new table past this


@dataclass(frozen=True)
class TransferItem:
    """What a transfer contributes to its result's layout (its name and source chunks aside)."""

    tensor: str
    dst_factor: int
    dst_chunks: tuple[int, ...]
    placement: Placement


class ValueTable:
    """Interned values of one producer, each with a code (its index); append-only.

    ``groups[c]``, ``transfers[c]``, ``steps[c]`` are the values of code ``c``. The
    producer chooses the keys it interns by (cheap ones: identities of values it keeps
    alive itself, such as its shared op tuples and placements). A group's op tuple and
    placements have codes too (``group_ops``, ``group_places``), by identity: a consumer
    maps those few values once instead of once per group.
    """

    def __init__(self) -> None:
        self.groups: list[GroupSpec] = []
        # per group code: the codes of its op tuple and (flat, from group_first) its chunks'
        # placements, interned by identity (kept alive here)
        self.group_ops: list[int] = []
        self.group_first: list[int] = []
        self.group_places: list[int] = []
        self.ops: list[tuple[int, ...]] = []
        self.placements: list[Placement] = []
        self._ops_codes: dict[int, int] = {}
        self._place_codes: dict[int, int] = {}
        self.transfers: list[TransferItem] = []
        self.steps: list[Step] = []
        self._group_codes: dict[Hashable, int] = {}
        self._transfer_codes: dict[Hashable, int] = {}
        self._step_codes: dict[Hashable, int] = {}

    def full(self) -> bool:
        """Past :data:`MAX_VALUES` values of one kind (the producer should start a new table)."""
        return max(len(self.groups), len(self.transfers), len(self.steps)) > MAX_VALUES

    def group_code(self, key: Hashable) -> int | None:
        """Code of the group spec interned under ``key``, if any."""
        return self._group_codes.get(key)

    def add_group(self, key: Hashable, value: GroupSpec) -> int:
        """Intern ``value`` under ``key``; its code."""
        c = self._group_codes[key] = len(self.groups)
        self.groups.append(value)
        o = self._ops_codes.get(id(value.ops))
        if o is None:
            o = self._ops_codes[id(value.ops)] = len(self.ops)
            self.ops.append(value.ops)
        self.group_ops.append(o)
        self.group_first.append(len(self.group_places))
        for p in value.chunks:
            k = self._place_codes.get(id(p))
            if k is None:
                k = self._place_codes[id(p)] = len(self.placements)
                self.placements.append(p)
            self.group_places.append(k)
        return c

    def transfer_code(self, key: Hashable) -> int | None:
        """Code of the transfer item interned under ``key``, if any."""
        return self._transfer_codes.get(key)

    def add_transfer(self, key: Hashable, value: TransferItem) -> int:
        """Intern ``value`` under ``key``; its code."""
        c = self._transfer_codes[key] = len(self.transfers)
        self.transfers.append(value)
        return c

    def step_code(self, key: Hashable) -> int | None:
        """Code of the order step interned under ``key``, if any."""
        return self._step_codes.get(key)

    def step_codes(self, keys: list[Hashable]) -> list[int | None]:
        """:meth:`step_code` of each key."""
        return list(map(self._step_codes.get, keys))

    def add_step(self, key: Hashable, value: Step) -> int:
        """Intern ``value`` under ``key``; its code."""
        c = self._step_codes[key] = len(self.steps)
        self.steps.append(value)
        return c


@dataclass(frozen=True, eq=False)
class ScheduleCodes:
    """Codes of one schedule's groups, transfers and order steps (in its order), in ``table``."""

    table: ValueTable
    groups: np.ndarray
    transfers: np.ndarray
    order: np.ndarray


class ScheduleSource(Protocol):
    """What a :class:`LazySchedule` is built from (its producer's decoder state)."""

    def codes(self) -> ScheduleCodes | None:
        """The schedule's codes (computed once; None: it has none, as one parsed from JSON)."""

    def objects(self) -> tuple[tuple[GroupSpec, ...], tuple[Any, ...], tuple[Step, ...]]:
        """Its ``groups``, ``transfers`` and ``order``: the values its codes name."""

    def key_text(self) -> str:
        """``repr(structural_key())`` of the schedule, from its codes (computed once)."""


_LAZY_FIELDS = frozenset(("groups", "transfers", "order"))


@keep_memo_inside  # compiler.memo keeps the memo in the instance (issue 20)
class LazySchedule(GraphSchedule):
    """A :class:`GraphSchedule` whose ``groups``, ``transfers`` and ``order`` are built
    when first read (from its :class:`ScheduleSource`); to every reader the schedule the
    same fields make.

    ``batch``, ``workload_key``, ``source`` and ``version`` are set at once. The first
    read of one of the other three fields builds all three (``source.objects()``) and
    stores them as ordinary attributes: later reads cost what a plain schedule's do.
    :func:`codes_of` and :func:`compiler.key_text.key_text` ask the source, so a
    candidate only identified, pre-checked and featurised never builds them.

    Equal to (and hashed as) the plain ``GraphSchedule`` with the same fields; ``repr``,
    pickling and ``copy`` give the plain one (an unpickled copy carries no codes, as
    today). ``dataclasses.replace`` builds a fully built copy without codes.

    Its memo (:func:`compiler.memo.memo_of`: the derived transfers and memory plan its
    decoder leaves) lives in its own ``__dict__`` (:func:`compiler.memo.keep_memo_inside`),
    not in the process's table with a finalizer: a kept candidate is fewer objects for the
    garbage collector.
    """

    @classmethod
    def deferred(cls, batch: int, workload_key: str | None, source: str,
                 built_by: ScheduleSource) -> LazySchedule:
        """A schedule whose other fields ``built_by`` builds when first read."""
        s = cls.__new__(cls)
        object.__setattr__(s, "batch", batch)
        object.__setattr__(s, "workload_key", workload_key)
        object.__setattr__(s, "source", source)
        object.__setattr__(s, "version", SCHEMA_VERSION)
        object.__setattr__(s, "_built_by", built_by)
        object.__setattr__(s, "_memo", None)  # compiler.memo.memo_of makes it (keep_memo_inside)
        object.__setattr__(s, "_space_known", None)  # its vector, set by the space that decoded it
        return s

    def __getattr__(self, name: str) -> Any:
        # only called for attributes not set: the three fields before they are built
        if name in _LAZY_FIELDS:
            src = self.__dict__.get("_built_by")
            if src is not None:
                groups, transfers, order = src.objects()
                object.__setattr__(self, "groups", groups)
                object.__setattr__(self, "transfers", transfers)
                object.__setattr__(self, "order", order)
                return self.__dict__[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def built_by(self) -> ScheduleSource | None:
        """Its source (None for a copy made by ``dataclasses.replace``)."""
        src: ScheduleSource | None = self.__dict__.get("_built_by")
        return src

    def is_built(self) -> bool:
        """Whether ``groups``, ``transfers`` and ``order`` were built (for tests, benches)."""
        return "groups" in self.__dict__

    def _fields(self) -> tuple[Any, ...]:
        return (self.batch, self.groups, self.transfers, self.order, self.workload_key,
                self.source, self.version)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, GraphSchedule):
            return NotImplemented
        if other is self:
            return True
        return self._fields() == (other.batch, other.groups, other.transfers, other.order,
                                  other.workload_key, other.source, other.version)

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return repr(GraphSchedule(*self._fields()))

    def __reduce__(self) -> tuple[Any, ...]:
        return (GraphSchedule, self._fields())


def attach_codes(schedule: GraphSchedule, codes: ScheduleCodes) -> None:
    """Leave ``codes`` beside ``schedule`` (its memo; dropped with the schedule)."""
    memo_of(schedule, limit=8)[_KEY] = codes


def codes_of(schedule: GraphSchedule) -> ScheduleCodes | None:
    """The codes its producer left beside ``schedule`` (or, for a :class:`LazySchedule`,
    its source's), or None."""
    if isinstance(schedule, LazySchedule):
        src = schedule.built_by()
        if src is not None:
            return src.codes()
    memo = peek_memo(schedule)
    if memo is None:
        return None
    codes: ScheduleCodes | None = memo.get(_KEY)
    return codes
