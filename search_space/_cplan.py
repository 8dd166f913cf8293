"""The memory plan of a compiled scope walk (:mod:`search_space._ccore`), built lazily.

The C walk (``_cwalk.c``) returns each step's L1 use packed (per step a count, then
the cores and bytes as ``bytes``); :func:`_plan_of` makes the
:class:`compiler.capacity.MemoryPlan` remembered beside the decoded schedule, whose
``steps`` (one :class:`compiler.capacity.StepMemory` per step walked) are built when
first read (:class:`_LazyPlan`): the pre-check reads only the plan's issue, the
explanation reads the steps; the simulator reads each step's L1 use and streamed
inputs as two lists (:meth:`_LazyPlan.step_facts`), made without the ``StepMemory``
values.
:class:`_Walked` is what a decode keeps of a compiled walk (its scopes, its issue, the plan
made from them when first read), whole or partial (stopped at its first overflow).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from compiler.capacity import CapacityIssue, MemoryPlan, StepMemory

Space = Any  # a search_space.Space (typed Any: see search_space._ccore)
_NAME = ("L1", "LLB", "DDR")


class _Walked:
    """What :meth:`Decoding.schedule` reads of a walk: each step's scope and the plan.

    The first overflow (``issue``) is known when the walk returns; the per-step layouts
    and the plan's per-step memory are built when first asked for (a capacity repair
    round reads only the issue of the walks it does not return). A ``partial`` walk
    stopped at its first overflow (``search_space._ccore.scope_walk`` with ``partial``):
    only its issue is read; its scopes, layouts and plan are refused
    (``search_space._ccore.walk_whole`` walks it again in full with the answers it kept,
    ``partial``: (group wants, producer wants))."""

    __slots__ = ("_layouts", "_plan", "_raw", "issue", "partial")

    def __init__(self, scopes: list[int], issue: CapacityIssue | None, raw: tuple[Any, ...],
                 partial: tuple[list[Any], list[Any]] | None = None) -> None:
        self._layouts: list[tuple[str, None]] | None = None
        self._plan: MemoryPlan | None = None
        self._raw = (scopes, raw)
        self.issue = issue
        self.partial = partial

    def _whole(self) -> None:
        if self.partial:
            raise RuntimeError("a partial walk (stopped at its first overflow) has no plan: "
                               "walk again in full")

    @property
    def scopes(self) -> list[int]:
        """Each step's scope: 0 L1, 1 LLB, 2 DDR."""
        self._whole()
        return self._raw[0]  # type: ignore[no-any-return]

    @property
    def layouts(self) -> list[tuple[str, None]]:
        self._whole()
        if self._layouts is None:
            self._layouts = [(_NAME[s], None) for s in self._raw[0]]
        return self._layouts

    def plan(self) -> MemoryPlan:
        self._whole()
        if self._plan is None:
            space, rows, *rest = self._raw[1]
            self._plan = _plan_of(self.issue, space, rows.names_of(), *rest)
        return self._plan


def walk_issue(walk: Any) -> CapacityIssue | None:
    """The first overflow of a walk: a compiled one's (:class:`_Walked`) without building
    its plan, else ``walk.plan().issue`` (a :class:`compiler.capacity.CapacityWalk`)."""
    if isinstance(walk, _Walked):
        return walk.issue
    return walk.plan().issue  # type: ignore[no-any-return]


def walk_partial(walk: Any) -> bool:
    """Whether ``walk`` is a compiled walk stopped at its first overflow (``partial``)."""
    return isinstance(walk, _Walked) and walk.partial is not None



def streamed_of(names: tuple[str, ...], mask: int) -> frozenset[str]:
    """The streamed inputs a walk's mask stands for: bit ``b`` is ``names[b]`` (the group's
    streamable inputs in input order, as ``search_space._ccore`` numbers them)."""
    return frozenset(t for b, t in enumerate(names) if mask >> b & 1)


def _plan_of(issue: CapacityIssue | None, space: Space,
             names_of: Callable[[], list[tuple[str, ...] | None]],
             over: int, usage: tuple[bytes, bytes, bytes], masks: bytes, helds: bytes,
             peak_l1: list[float], peak_llb: float) -> MemoryPlan:
    """The memory plan of a compiled walk (the steps up to an overflow), as
    ``CapacityWalk.plan`` gives it; its per-step memory is built when first read
    (:class:`_LazyPlan`: a candidate that is only pre-checked reads its issue alone)."""
    return _LazyPlan(_StepsOf(_streamed_sets(space), names_of, over, usage, masks, helds),
                     tuple(int(x) for x in peak_l1), int(peak_llb), issue)


class _StepsOf:
    """Builds a compiled walk's per-step memory (``StepMemory`` values) from its packed
    usage (``_cwalk.c``: per step a count, then the cores and bytes), masks (a uint64 per
    step) and helds (a byte per step)."""

    __slots__ = ("done", "helds", "masks", "names_of", "over", "stab", "usage")

    def __init__(self, stab: dict[tuple[tuple[str, ...], int], frozenset[str]],
                 names_of: Callable[[], list[tuple[str, ...] | None]], over: int,
                 usage: tuple[bytes, bytes, bytes], masks: bytes, helds: bytes) -> None:
        # the space's table of streamed sets, not the space: a plan never read must not
        # keep the space (and its shape tables) alive
        self.stab, self.names_of, self.over = stab, names_of, over
        self.usage, self.masks, self.helds = usage, masks, helds
        self.done: tuple[list[Any], list[Any], list[Any]] | None = None

    def facts(self) -> tuple[list[tuple[tuple[int, float], ...]], list[frozenset[str]],
                             list[bool]]:
        """Each step's ``(l1_bytes, streamed, held)`` as three lists (the fields of the
        ``StepMemory`` values, without making them: what the simulator reads), made once."""
        got = self.done
        if got is not None:
            return got
        stab = self.stab
        counts = memoryview(self.usage[0]).cast("i").tolist()
        cores = memoryview(self.usage[1]).cast("i").tolist()
        vals = memoryview(self.usage[2]).cast("d").tolist()
        masks, helds, names_of = memoryview(self.masks).cast("Q"), self.helds, self.names_of()
        l1s: list[tuple[tuple[int, float], ...]] = []
        streams: list[frozenset[str]] = []
        held: list[bool] = []
        empty: frozenset[str] = frozenset()
        u = 0
        for k, names in enumerate(names_of if self.over < 0 else names_of[:self.over]):
            m = counts[k]
            l1s.append(tuple(zip(cores[u:u + m], vals[u:u + m])))
            u += m
            if names is None:
                streams.append(empty)
                held.append(False)
                continue
            skey = (names, masks[k])
            streamed = stab.get(skey)
            if streamed is None:
                streamed = stab[skey] = streamed_of(names, masks[k])
            streams.append(streamed)
            held.append(helds[k] != 0)
        got = self.done = (l1s, streams, held)
        return got

    def __call__(self) -> tuple[StepMemory, ...]:
        return tuple(map(StepMemory, *self.facts()))


class _LazyPlan(MemoryPlan):
    """A :class:`compiler.capacity.MemoryPlan` whose ``steps`` are built on first read.

    Equal to (and hashed as) the plain plan of the same values; pickles as one.
    ``dataclasses.replace`` does not apply (its ``__init__`` differs): build a
    ``MemoryPlan`` from the fields instead.
    """

    def __init__(self, build: _StepsOf, peak_l1: tuple[int, ...], peak_llb: int,
                 issue: CapacityIssue | None) -> None:  # noqa: D107 - the dataclass's fields
        object.__setattr__(self, "_build", build)
        object.__setattr__(self, "_steps", None)
        object.__setattr__(self, "peak_l1_bytes_per_core", peak_l1)
        object.__setattr__(self, "peak_llb_bytes", peak_llb)
        object.__setattr__(self, "issue", issue)

    @property  # type: ignore[misc]
    def steps(self) -> tuple[StepMemory, ...]:  # type: ignore[override]
        steps: tuple[StepMemory, ...] | None = self.__dict__["_steps"]
        if steps is None:
            steps = self.__dict__["_build"]()
            object.__setattr__(self, "_steps", steps)
            object.__setattr__(self, "_build", None)
        return steps

    def step_facts(self) -> tuple[list[tuple[tuple[int, float], ...]], list[frozenset[str]]]:
        """Each step's ``l1_bytes`` and ``streamed`` (as ``steps`` has them), as two lists,
        without making the ``StepMemory`` values when they are not made yet (the simulator
        reads these two fields of every step of every run: :func:`sim._plans.step_facts`)."""
        build: _StepsOf | None = self.__dict__["_build"]
        if build is None:
            steps = self.steps
            return [m.l1_bytes for m in steps], [m.streamed for m in steps]
        l1s, streams, _ = build.facts()
        return l1s, streams

    def _fields(self) -> tuple[Any, ...]:
        return (self.steps, self.peak_l1_bytes_per_core, self.peak_llb_bytes, self.issue)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MemoryPlan):
            return NotImplemented
        return self._fields() == (other.steps, other.peak_l1_bytes_per_core,
                                  other.peak_llb_bytes, other.issue)

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return repr(MemoryPlan(*self._fields()))

    def __reduce__(self) -> tuple[Any, ...]:
        return (MemoryPlan, self._fields())


def _streamed_sets(space: Space) -> dict[tuple[tuple[str, ...], int], frozenset[str]]:
    sets: dict[tuple[tuple[str, ...], int], frozenset[str]] | None = getattr(space, "_cstreamed", None)
    if sets is None:
        sets = space._cstreamed = {}  # type: ignore[attr-defined]
    return sets
