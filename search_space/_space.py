"""``Space``: every graph schedule a careful engineer would consider, four ways to walk it.

Built by :func:`build_space` from a graph, a target and a batch, following the
manual-schedule guide's design method (see :mod:`search_space._structure` for
where boundaries come from and :mod:`search_space._build` for how parameters
become a schedule). The parameters:

========== ======================== ========================= ==============================================
kind        one per                   choices
=========== ========================= ==============================================
batch       space (``batch_choices``) the batch sizes
order       space                     ``depth`` (the guide's waves) or ``breadth``
lookahead   space                     0-3 chunks a producer runs ahead (depth only)
granularity space                     share of the cut points that are boundaries:
                                      ``1/4``, ``1/8``, ``1/16``, ``1/32``, ``0``
cut         cut point (one tensor     rank 0-31; a boundary when below
            made since the last       ``32 x granularity``
            one crosses it)
mode        segment (a block's first) ``whole``, ``anchors`` (the guide's matmul
                                      boundaries) or ``ops`` (one group per op)
samples     segment (a unit's first)  samples per core part (with ``parts``: the
                                      split)
cpp         segment (a unit's first)  cores per part
parts       segment (a unit's first)  core parts a chunk's samples spread over
perm        segment (a unit's first)  ``rotK``, ``reuse`` (each group on its
                                      producer's cores, the guide's "scheme 2") or
                                      ``ilK`` (the guide's interleaved orders)
spread      segment (a unit's first)  successive chunks on successive core sets
xscope      segment (a unit's first)  scope of the groups' split/concat transfers
scope       op (a group's first)      scope policy of the chunk outputs by wave
=========== ========================= ==============================================

A *block* is a run of segments between boundaries; a *unit* is the shortest run
of a block's segments that none of its groups crosses (a whole block is one
unit; an anchor partition usually has one per segment). A unit's groups share
its slot parameters (samples .. xscope).

Parameter names carry the op index they belong to (``samples@18``), so they are
stable for a graph: a study resumes, TPE's ``group=True`` sees the conditional
structure. With ``ties`` on, repeated segments (equal structural signatures)
share the parameters of their first occurrence.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from compiler.codes import ValueTable
from compiler.errors import GraphtuneError, ScheduleError
from compiler.key_text import key_text
from compiler.schedule import GraphSchedule, Placement, Step
from search_space._build import decode_fitted, decode_with
from search_space._dims import (
    CUT_BELOW,
    GRANULARITIES,
    KIND_HELP,
    LOOKAHEADS,
    MODES,
    ORDERS,
    RANKS,
    SCOPE_POLICIES,
    TRANSFER_SCOPES,
    Dim,
    divisors,
    perm_choices,
)
from search_space._structure import GroupInfo, Structure, analyse

if TYPE_CHECKING:
    from compiler.graph import Graph
    from compiler.target import Target
    from search_space._build import Block

__all__ = ["Check", "Projection", "Space", "SpaceError", "SpaceOptions", "build_space", "build_spaces"]

_MOVES = ("boundary", "merge", "split_group", "split", "rebind", "scope", "reorder")
_FIRST_GRAIN = GRANULARITIES.index("1/32")  # the coarsest granularity with boundaries
# no-op children a decoded schedule remembers (_Mark.noops): 11 % of a BERT-base tune's decodes
# were a child equal to its parent (reorder 68 % of its moves), a third of them drawn before
NOOP_CHILDREN = 32


class _Token:
    """A space's mark on the schedules it decoded (``Space._remember``): compared by identity."""

    __slots__ = ()


class _Mark:
    """What :meth:`Space._remember` marks a decoded schedule with: the space's token and, made
    when first asked (:meth:`Space._known`: ``encode``, ``mutate``, ``project``), the
    canonical vector (the decoded one, 0 where not read) and the free parameters read,
    sorted. Until then it keeps the vector decoded and the recorder's marks of parameters
    read as they are (a bytearray: the garbage collector does not track it), so a sampled,
    pre-checked candidate never pays for them (~40 us a BERT-large candidate, issue 20)."""

    __slots__ = ("_made", "_read", "_vec", "kinds", "noops", "token")

    def __init__(self, token: _Token, vec: np.ndarray | None, read: bytearray | None,
                 made: tuple[np.ndarray, tuple[int, ...]] | None = None) -> None:
        self.token, self._vec, self._read, self._made = token, vec, read, made
        # the parameters read by kind and the cut parameters among them (Space._by_kind),
        # made when the schedule is first mutated: a parent is mutated many times a round
        self.kinds: tuple[dict[str, list[int]], np.ndarray] | None = None
        # children (their vectors' bytes) :meth:`Space.mutate` decoded to this schedule again
        # (up to NOOP_CHILDREN): drawn again, they are known to be no move without decoding
        self.noops: set[bytes] | None = None

    def known(self) -> tuple[np.ndarray, tuple[int, ...]]:
        """(canonical vector, free parameters read in ascending order), made once."""
        if self._made is None:
            vec, read = self._vec, self._read
            assert vec is not None and read is not None
            idx = np.flatnonzero(np.frombuffer(read, dtype=np.uint8))
            canon = np.zeros(len(vec), dtype=np.int16)
            canon[idx] = vec[idx]
            self._made = (canon, tuple(idx.tolist()))
            self._vec = self._read = None
        return self._made


class SpaceError(GraphtuneError):
    """A search space cannot be built, or a vector or schedule does not belong to it."""


@dataclass(frozen=True)
class SpaceOptions:
    """How a space is built.

    Attributes:
        min_group_ops: Blocks smaller than this merge with the next segment.
        max_group_ops: Blocks never grow beyond this many ops (None: no limit).
        ties: Repeated segments share their parameters (a smaller space). The segments
            are then the single-tensor ones only (no cut points where several tensors
            cross: tied twins of those disagree too often for a projection to find).
        batch_choices: Batch sizes to choose from (throughput objective); empty:
            the batch given to :func:`build_space` only.
        max_split: Samples-per-part choices stop where a group would need more
            chunks than this (each chunk is a step; repairs may still go beyond).
        per_op: Blocks may be one group per op (the ``ops`` mode, as O0-O2 group);
            without it those levels cannot be projected.
        per_op_prior: Probability :meth:`Space.sample` gives a block the ``ops`` mode
            (the other modes share the rest). One group per op multiplies the steps
            of a schedule and rarely pays; Optuna and :meth:`Space.sample_vectors`
            with ``uniform=True`` still draw it like any other choice.
        repair_rounds: When the capacity walk still overflows (a step that does not fit
            even with its output streamed out), decoding re-decodes up to this many
            times, each time one scope parameter of a result crowding the overflow one
            step slower (0: none). Free when nothing overflows: the walk is remembered.
    """

    min_group_ops: int = 1
    max_group_ops: int | None = None
    ties: bool = False
    batch_choices: tuple[int, ...] = ()
    max_split: int = 64
    per_op: bool = True
    per_op_prior: float = 0.02
    repair_rounds: int = 2

    def to_json(self) -> dict[str, Any]:
        """Keyed JSON."""
        return {"min_group_ops": self.min_group_ops, "max_group_ops": self.max_group_ops,
                "ties": self.ties, "batch_choices": list(self.batch_choices),
                "max_split": self.max_split, "per_op": self.per_op,
                "per_op_prior": self.per_op_prior, "repair_rounds": self.repair_rounds}


@dataclass(frozen=True)
class Check:
    """Result of :meth:`Space.precheck`: ``ok``, else ``kind`` (structure|capacity) and why."""

    ok: bool
    kind: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class Projection:
    """Result of :meth:`Space.project`.

    Attributes:
        schedule: The schedule decoded from the projection (structurally equal to
            the input), or None when the input cannot be expressed.
        vector: Its encoding (None with ``schedule``).
        params: Optuna parameters (``study.enqueue_trial(params)`` seeds a study).
        reason: Why it cannot be expressed (None when it can).
    """

    schedule: GraphSchedule | None
    vector: np.ndarray | None = None
    params: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None


class _Recorder:
    """A reader over a full-length assignment that records which parameters were read.

    ``active`` holds one byte per free parameter, 1 where it was read (``rep[d]`` of a read
    of ``d``): the compiled decoder sets them in place (a dict's insert per read was ~3-4 %
    of a candidate's instructions, issue 20); :meth:`read` lists them. ``n_free`` defaults
    to the largest free parameter of ``rep`` plus one."""

    __slots__ = ("active", "rep", "values")

    def __init__(self, values: list[int] | memoryview, rep: list[int], n_free: int | None = None) -> None:
        self.values = values
        self.rep = rep
        self.active = bytearray(max(rep, default=-1) + 1 if n_free is None else n_free)

    def __call__(self, d: int) -> int:
        self.active[self.rep[d]] = 1
        return self.values[d]

    def read(self) -> list[int]:
        """The free parameters read, ascending."""
        return read_params(self.active)


def read_params(active: bytearray) -> list[int]:
    """The free parameters a recorder's ``active`` marks as read, ascending."""
    return np.flatnonzero(np.frombuffer(active, dtype=np.uint8)).tolist()  # type: ignore[no-any-return]


class Space:
    """A search space of GraphSchedules for one graph (see the module doc).

    Example:
        >>> space = build_space(graph, Target.default(), 16)
        >>> s = space.sample(np.random.default_rng(0))
        >>> v = space.encode(s); space.decode(v) == s      # structurally: structural_key
        >>> space.precheck(s).ok
        >>> study.optimize(lambda t: cost(space.suggest(t)))
    """

    def __init__(self, graph: Graph, target: Target, batch: int, options: SpaceOptions,
                 graph_at: Callable[[int], Graph] | None = None) -> None:
        self.graph = graph
        self.target = target
        self.batch = batch
        self.options = options
        self._graph_at = graph_at
        self._graphs: dict[int, Graph] = {graph.batch: graph}
        self.structure: Structure = analyse(graph, wide=not options.ties)
        self.batches: tuple[int, ...] = tuple(options.batch_choices) or (batch,)
        self.divisors = {b: divisors(b) for b in self.batches}
        self._blocks: dict[tuple[int, int, str], Block] = {}
        self._infos: dict[tuple[object, ...], GroupInfo] = {}
        self._op_sets: dict[tuple[int, ...], tuple[int, ...]] = {}
        self._places: dict[tuple[str, tuple[tuple[int, ...], ...]], Placement] = {}
        self._steps: dict[tuple[str, str, int], Step] = {}
        self._values = ValueTable()
        self._binds: dict[tuple[object, ...], tuple[tuple[int, ...], ...]] = {}
        # what marks this space's own decodes (_remember): not the space, so a kept
        # schedule does not keep the space alive
        self._token = _Token()
        self._layout()

    def __getstate__(self) -> tuple[Any, ...]:
        """What the space is made of, not what decoding cached in it (some of that is C
        state that does not pickle, and all of it fills again): a copy is rebuilt from the
        graph, target, batch, options and ``graph_at``, and decodes as the original does."""
        return self.graph, self.target, self.batch, self.options, self._graph_at

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        self.__init__(*state)  # type: ignore[misc]

    # ---- layout ------------------------------------------------------------------------
    def _layout(self) -> None:
        st, n = self.structure, self.target.chip.cores_per_cluster
        dims: list[Dim] = []

        def add(name: str, kind: str, choices: Sequence[Any], at: int = -1) -> int:
            dims.append(Dim(name, kind, tuple(choices), at))
            return len(dims) - 1

        self.d_batch = add("batch", "batch", self.batches) if len(self.batches) > 1 else -1
        self.d_order = add("order", "order", ORDERS)
        self.d_lookahead = add("lookahead", "lookahead", LOOKAHEADS)
        self.d_gran = add("granularity", "granularity", GRANULARITIES) if len(st.segments) > 1 \
            else -1
        self.d_cut = [add(f"cut@{b}", "cut", tuple(range(RANKS if st.single[k] else 2 * RANKS)), b)
                      for k, (_, b) in enumerate(st.segments[:-1])]
        modes = MODES if self.options.per_op else MODES[:2]
        self.d_mode = [add(f"mode@{a}", "mode", modes, a) for a, _ in st.segments]
        splits = sorted({d for b in self.batches for d in self.divisors[b]
                         if b // d <= self.options.max_split} | {max(self.batches)})
        core_counts = divisors(n)
        self.slot: dict[int, int] = {}
        for p, _ in st.segments:  # a block's groups share the slot of its first segment
            self.slot[p] = add(f"samples@{p}", "samples", splits, p)
            add(f"cpp@{p}", "cpp", core_counts, p)
            add(f"parts@{p}", "parts", core_counts, p)
            add(f"perm@{p}", "perm", perm_choices(n), p)
            add(f"spread@{p}", "spread", (0, 1), p)
            add(f"xscope@{p}", "xscope", TRANSFER_SCOPES, p)
        self.d_scope = [add(f"scope@{i}", "scope", SCOPE_POLICIES, i) for i in range(len(self.graph.ops))]
        self._seg_dims: dict[int, list[int]] = {}  # segment start -> its mode and unit dims
        for d, dim in enumerate(dims):
            if dim.kind in ("mode", "samples", "cpp", "parts", "perm", "spread", "xscope"):
                self._seg_dims.setdefault(dim.at, []).append(d)
        self.dims: tuple[Dim, ...] = tuple(dims)
        self._ties_untied = np.arange(len(dims))
        self._ties_tied = self._tie_map()
        rep = self._ties_tied if self.options.ties else self._ties_untied
        free = sorted(set(rep.tolist()))
        index = {d: k for k, d in enumerate(free)}
        self.rep = np.array([index[int(r)] for r in rep], dtype=np.int64)  # full dim -> free index
        self._rep_list: list[int] = self.rep.tolist()
        self._n_free = len(free)
        self._rep_plain = bool((self.rep == np.arange(len(self.rep))).all())  # no ties: rep is k -> k
        self.free: tuple[Dim, ...] = tuple(dims[d] for d in free)
        self.n_choices = np.array([len(d.choices) for d in self.free], dtype=np.int64)
        self._n_choices_f = self.n_choices.astype(np.float64)  # what sample_vectors multiplies by
        self._choice_index = [{v: i for i, v in enumerate(d.choices)} for d in self.free]
        unit = np.zeros(len(dims), dtype=np.int64)  # crossover units: segments (+1), globals 0
        for d, dim in enumerate(dims):
            if dim.at >= 0:
                unit[d] = st.seg_of_op[dim.at] + 1
        self._unit_of_free = np.zeros(len(free), dtype=np.int64)
        for d in range(len(dims)):
            self._unit_of_free[self.rep[d]] = unit[free[self.rep[d]]]
        self._n_units = len(st.segments) + 1
        self._mode_free = np.array(sorted({int(self.rep[d]) for d in self.d_mode}), dtype=np.int64)
        # each cut parameter's cut index (read only: mutate and the neighbourhoods share it)
        self.cut_free: dict[int, int] = {int(self.rep[d]): k for k, d in enumerate(self.d_cut)}
        self._kind_of_free: list[str] = [d.kind for d in self.free]
        self._at_of_free: list[int] = [d.at for d in self.free]
        self._free_names: list[str] = [d.name for d in self.free]
        self._free_choices: list[tuple[Any, ...]] = [d.choices for d in self.free]

    def _tie_map(self) -> np.ndarray:
        """Full dim -> representative full dim when repeated segments share parameters."""
        st = self.structure
        rep = np.arange(len(self.dims))
        first: dict[str, int] = {}
        pair_first: dict[tuple[str, str], int] = {}
        for k, (a, b) in enumerate(st.segments):
            r = first.setdefault(st.signature[k], k)
            if k + 1 < len(st.segments):
                pr = pair_first.setdefault((st.signature[k], st.signature[k + 1]), k)
                rep[self.d_cut[k]] = self.d_cut[pr]
            if r == k:
                continue
            ra = st.segments[r][0]
            rep[self.d_mode[k]] = self.d_mode[r]
            for i in range(a, b + 1):
                j = i - a + ra
                rep[self.d_scope[i]] = self.d_scope[j]
                if i in self.slot and j in self.slot:
                    for off in range(6):
                        rep[self.slot[i] + off] = self.slot[j] + off
        return rep

    # ---- helpers -----------------------------------------------------------------------
    def graph_for(self, batch: int) -> Graph:
        """The graph at ``batch`` (from ``graph_at`` for batches other than the graph's)."""
        g = self._graphs.get(batch)
        if g is None:
            if self._graph_at is None:
                raise SpaceError(f"no graph at batch {batch}: build the space with graph_at")
            g = self._graph_at(batch)
            if len(g.ops) != len(self.graph.ops) or g.batch != batch:
                raise SpaceError(f"graph_at({batch}) returned a different model (or batch)")
            self._graphs[batch] = g
        return g

    def placement(self, scope: str, bind: tuple[tuple[int, ...], ...]) -> Placement:
        """A shared Placement value (decoding makes millions of them)."""
        key = (scope, bind)
        p = self._places.get(key)
        if p is None:
            p = self._places[key] = Placement(scope, bind)
        return p

    def values(self) -> ValueTable:
        """The table the decoder interns its shared values in (a new one once full)."""
        if self._values.full():
            self._values = ValueTable()
        return self._values

    def step(self, node: tuple[str, str, int]) -> Step:
        """A shared Step value for a chunk-DAG node."""
        st = self._steps.get(node)
        if st is None:
            st = self._steps[node] = (Step("group", node[1], node[2]) if node[0] == "g"
                                      else Step("transfer", node[1]))
        return st

    @property
    def dimension(self) -> int:
        """Length of an encoding vector (free parameters)."""
        return len(self.free)

    def _remember(self, s: GraphSchedule, vec: np.ndarray, active: Sequence[int]) -> None:
        """Mark a schedule this space decoded (every decode is a
        :class:`compiler.codes.LazySchedule`) with its canonical vector and the parameters
        read (ascending), under this space's token (never the space: a kept schedule must
        not keep it alive): the mark (:class:`_Mark`) travels with the schedule, no weak
        reference, callback or table entry per candidate for the garbage collector to walk
        (issue 20)."""
        object.__setattr__(s, "_space_known", _Mark(self._token, None, None, (vec, tuple(active))))

    def _known(self, s: GraphSchedule) -> tuple[np.ndarray, tuple[int, ...]] | None:
        """The vector and active parameters of a schedule this space decoded, else None
        (another space's decode, a copy, a parsed or hand-made schedule)."""
        mark = getattr(s, "_space_known", None)
        if mark is not None and mark.token is self._token:
            return mark.known()  # type: ignore[no-any-return]
        return None

    def _decoded_here(self, s: GraphSchedule) -> bool:
        """Whether this space decoded ``s`` (its mark, without making the mark's vector)."""
        mark = getattr(s, "_space_known", None)
        return mark is not None and mark.token is self._token

    def _decode(self, get: Callable[[int], int]) -> GraphSchedule:
        if self.options.repair_rounds > 0:
            return decode_fitted(self, get, self.options.repair_rounds)
        return decode_with(self, get)[0]

    # ---- the numeric view ----------------------------------------------------------------
    def _decode_free(self, vec: np.ndarray) -> tuple[GraphSchedule, np.ndarray, list[int]]:
        s = self._decode_marked(vec)
        canon, active = s._space_known.known()  # type: ignore[attr-defined]
        return s, canon, list(active)

    def _decode_marked(self, vec: np.ndarray) -> GraphSchedule:
        """Decode a free vector and mark the schedule (:class:`_Mark`): its canonical vector
        and parameters read are made only when asked (``sample`` and a mutated child never
        ask)."""
        values: list[int] | memoryview
        if self._rep_plain and vec.dtype == np.int16:
            # every parameter free (no ties): the vector's bytes as they are, read as int16
            # (a memoryview: the compiled readers read the bytes in place, the Python ones
            # index it; the list of ~2,000 ints it replaces was ~2.5 % of a BERT-base
            # candidate's instructions, issue 20)
            values = memoryview(vec.tobytes()).cast("h")
        else:
            values = vec[self.rep].tolist()
        rec = _Recorder(values, self._rep_list, self._n_free)
        s = self._decode(rec)
        # the recorder's table and a copy of the vector (the caller's may change) kept as
        # they are: the recorder is gone, so the table no longer changes
        object.__setattr__(s, "_space_known", _Mark(self._token, vec.copy(), rec.active))
        return s

    def decode(self, vector: np.ndarray | Sequence[int]) -> GraphSchedule:
        """The schedule a vector of choice indices describes (inactive entries ignored).

        Raises:
            SpaceError: wrong length, or an entry outside its parameter's choices.
        """
        v = np.asarray(vector)
        if v.shape != (len(self.free),):
            raise SpaceError(f"a vector of this space has {len(self.free)} entries, got {v.shape}")
        bad = np.flatnonzero((v < 0) | (v >= self.n_choices))
        if bad.size:
            d = self.free[int(bad[0])]
            raise SpaceError(f"entry {int(bad[0])} ({d.name}) is {int(v[bad[0]])}: "
                             f"{d.name} has {len(d.choices)} choices")
        return self._decode_marked(v.astype(np.int16))

    def encode(self, schedule: GraphSchedule) -> np.ndarray:
        """The canonical vector of a schedule of this space (inactive entries 0).

        Raises:
            SpaceError: the schedule cannot be expressed (the reason is the message).
        """
        known = self._known(schedule)
        if known is not None:
            return known[0].copy()
        p = self.project(schedule)
        if p.vector is None:
            raise SpaceError(f"schedule not in this space: {p.reason}")
        return p.vector

    def encode_many(self, schedules: Sequence[GraphSchedule]) -> np.ndarray:
        """``encode`` of many schedules as one ``(len, dimension)`` int16 array."""
        out = np.zeros((len(schedules), len(self.free)), dtype=np.int16)
        for k, s in enumerate(schedules):
            out[k] = self.encode(s)
        return out

    def sample_vectors(self, rng: np.random.Generator, count: int,
                       uniform: bool = False) -> np.ndarray:
        """``count`` random vectors: every parameter uniform over its choices, except the
        block mode ``ops``, drawn with probability ``options.per_op_prior`` (all of them
        uniform with ``uniform=True``)."""
        # the same draws and products as (random * n_choices).astype(int16), in place, with
        # the counts as floats already (numpy's per-call work is most of a ResNet-50 draw)
        draw = rng.random((count, len(self.free)))
        np.multiply(draw, self._n_choices_f, out=draw)
        vecs = draw.astype(np.int16)
        if not uniform and self.options.per_op and self._mode_free.size:
            k = self._mode_free.size
            ops = rng.random((count, k)) < self.options.per_op_prior
            other = rng.random((count, k))
            other *= len(MODES) - 1
            modes = other.astype(np.int16)
            modes[ops] = MODES.index("ops")
            vecs[:, self._mode_free] = modes
        return vecs

    def sample(self, rng: np.random.Generator, uniform: bool = False) -> GraphSchedule:
        """A random schedule of the space (see :meth:`sample_vectors`)."""
        return self._decode_marked(self.sample_vectors(rng, 1, uniform)[0])

    # ---- Optuna --------------------------------------------------------------------------
    def suggest(self, trial: Any) -> GraphSchedule:
        """Define-by-run: ask ``trial`` for each parameter that matters, return the schedule.

        Names are stable (``samples@18``: the unit starting at op 18), so TPE with
        ``multivariate=True, group=True`` models the conditional structure.
        """
        values = np.zeros(len(self.free), dtype=np.int16)
        asked: dict[int, int] = {}

        def get(d: int) -> int:
            f = int(self.rep[d])
            hit = asked.get(f)
            if hit is None:
                dim = self.free[f]
                value = trial.suggest_categorical(dim.name, list(dim.choices))
                hit = asked[f] = self._choice_index[f][value]
                values[f] = hit
            return hit

        s = self._decode(get)
        active = sorted(asked)
        self._remember(s, values, active)
        return s

    def params_of(self, vector: np.ndarray) -> dict[str, Any]:
        """Optuna parameters (name -> value) of a vector: only those decoding reads.

        Raises:
            SpaceError: the vector is not of this space's length.
        """
        v = np.asarray(vector, dtype=np.int16)
        if v.shape != (len(self.free),):
            raise SpaceError(f"a vector of this space has {len(self.free)} entries, got {v.shape}")
        _, canon, active = self._decode_free(v)
        return self._params(canon, active)

    # ---- evolution -----------------------------------------------------------------------
    def mutate(self, schedule: GraphSchedule, rng: np.random.Generator,
               move: str | None = None) -> GraphSchedule:
        """One local move: a boundary moves, groups merge or split, a split factor, a core
        binding, a scope policy or the order changes. Returns a different schedule
        when the move allows one (up to 32 attempts).

        Args:
            schedule: A schedule of this space (encodable).
            rng: Randomness.
            move: One of ``boundary, merge, split_group, split, rebind, scope, reorder``
                (default: a random one each attempt).
        """
        vec, _, (by_kind, cuts) = self._by_kind(schedule)
        key = key_text(schedule)  # its codes' text: the structural key's repr, cheaper
        cut_free = self.cut_free
        mark: _Mark | None = getattr(schedule, "_space_known", None)
        if mark is not None and mark.token is not self._token:
            mark = None  # another space's decode: nothing kept
        noops = mark.noops if mark is not None else None
        for _ in range(32):
            kind = move or _MOVES[int(rng.integers(len(_MOVES)))]
            child = self._move(vec, kind, by_kind, cut_free, rng, cuts)
            if child is None:
                continue
            raw = child.tobytes() if mark is not None else b""
            if noops is not None and raw in noops:
                continue  # decoded before to this schedule (decoding is deterministic)
            s = self._decode_marked(child)
            if key_text(s) != key:
                return s
            if mark is not None:
                if noops is None:
                    noops = mark.noops = set()
                if len(noops) < NOOP_CHILDREN:
                    noops.add(raw)
        return schedule

    def _by_kind(self, schedule: GraphSchedule
                 ) -> tuple[np.ndarray, tuple[int, ...], tuple[dict[str, list[int]], np.ndarray]]:
        """A schedule of this space's vector, its free parameters read (ascending) and those
        by kind (each list ascending) with the cut parameters among them as an array; the
        last made once per decoded schedule (kept in its mark: a parent is mutated many
        times a round, and the loop over its ~600 parameters was ~40 us of a BERT-base
        child). The lists are shared: read them, never change them."""
        vec = self.encode(schedule)
        mark: _Mark | None = getattr(schedule, "_space_known", None)
        if mark is not None and mark.token is not self._token:
            mark = None  # another space's decode: nothing kept
        active = mark.known()[1] if mark is not None else tuple(self._decode_free(vec)[2])
        kinds = mark.kinds if mark is not None else None
        if kinds is None:
            by_kind: dict[str, list[int]] = {}
            of = self._kind_of_free
            for f in active:
                got = by_kind.get(of[f])
                if got is None:
                    got = by_kind[of[f]] = []
                got.append(f)
            kinds = (by_kind, np.array(by_kind.get("cut", ()), dtype=np.int64))
            if mark is not None:
                mark.kinds = kinds
        return vec, active, kinds

    def _move(self, vec: np.ndarray, kind: str, by_kind: dict[str, list[int]],
              cut_free: dict[int, int], rng: np.random.Generator,
              cut_arr: np.ndarray | None = None) -> np.ndarray | None:
        child = vec.copy()
        cuts = by_kind.get("cut", [])

        def reroll(candidates: list[int]) -> np.ndarray | None:
            if not candidates:
                return None
            f = candidates[int(rng.integers(len(candidates)))]
            if self.n_choices[f] < 2:
                return None
            step = int(rng.integers(1, self.n_choices[f]))
            child[f] = (int(child[f]) + step) % int(self.n_choices[f])
            return child

        gran = int(self.rep[self.d_gran]) if self.d_gran >= 0 else -1
        below = CUT_BELOW[GRANULARITIES[int(child[gran])]] if gran >= 0 else 0
        if cut_arr is None:
            cut_arr = np.array(cuts, dtype=np.int64)
        is_on = child[cut_arr] < below
        on: list[int] = cut_arr[is_on].tolist()
        off: list[int] = cut_arr[~is_on].tolist()

        def rank(lo: int, hi: int) -> int:
            return int(rng.integers(lo, hi))

        if kind == "boundary":  # a boundary moves to a neighbouring cut point
            if not on:
                return None
            f = on[int(rng.integers(len(on)))]
            k = cut_free.get(f)
            if k is None:
                return None
            nb = [k + dk for dk in (-1, 1) if 0 <= k + dk < len(self.d_cut)]
            g = int(self.rep[self.d_cut[nb[int(rng.integers(len(nb)))]]]) if nb else None
            if g is None or child[g] < below:
                return None
            # a cut point where several tensors cross has twice the ranks: stay in range
            child[f], child[g] = min(int(child[g]), int(self.n_choices[f]) - 1), child[f]
            return child
        if kind == "merge":  # a boundary goes away
            if not on:
                return None
            child[on[int(rng.integers(len(on)))]] = rank(below, RANKS)
            return child
        if kind == "split_group":  # a new boundary, or a block's mode changes
            modes = by_kind.get("mode", [])
            if below == 0 and gran >= 0:
                # no boundaries at all (O3's one group): every cut point may become the
                # one boundary, at the coarsest granularity that has boundaries
                off = sorted(cut_free)
                modes = [*modes, gran]
            pick = int(rng.integers(len(off) + len(modes))) if off or modes else -1
            if pick < 0:
                return None
            if pick < len(off):
                if below == 0:
                    child[gran] = _FIRST_GRAIN
                    below = CUT_BELOW[GRANULARITIES[_FIRST_GRAIN]]
                    for f in cut_free:  # inactive cuts are 0 in a canonical vector
                        child[f] = rank(below, int(self.n_choices[f]))
                child[off[pick]] = rank(0, below)
                self._inherit(child, cut_free[off[pick]], by_kind)
                return child
            return reroll(modes)
        if kind == "split":
            return reroll(by_kind.get("samples", []) + by_kind.get("parts", []))
        if kind == "rebind":
            return reroll([f for k in ("cpp", "parts", "perm", "spread")
                           for f in by_kind.get(k, [])])
        if kind == "scope":
            return reroll(by_kind.get("scope", []) + by_kind.get("xscope", []))
        if kind == "reorder":
            return reroll(by_kind.get("order", []) + by_kind.get("lookahead", []))
        raise SpaceError(f"unknown move {kind!r}: use one of {', '.join(_MOVES)}")

    def _inherit(self, child: np.ndarray, k: int, by_kind: dict[str, list[int]]) -> None:
        """A new boundary at cut point ``k``: the segment after it starts a group, whose
        parameters (inactive until now: 0 in a canonical vector, i.e. the most chunks)
        are those of the group it is cut from (the active parameter of each kind nearest
        before it): the move splits a group in two (or, where the new segment leaves
        several tensors to later ops, its block falls back to its anchor partition)."""
        start = self.structure.segments[k + 1][0]
        seg = [int(self.rep[d]) for d in self._seg_dims[start]]
        kind_of, at = self._kind_of_free, self._at_of_free  # lists: no record read a param
        for f in [*seg, int(self.rep[self.d_scope[start]])]:
            same = by_kind.get(kind_of[f], ())
            if f in same:
                continue
            src = [a for a in same if at[a] < start]
            if src:  # the nearest before (the first of equals, as max keeps)
                child[f] = child[max(src, key=at.__getitem__)]

    def crossover(self, a: GraphSchedule, b: GraphSchedule, rng: np.random.Generator) -> GraphSchedule:
        """Uniform crossover by segment: each segment's parameters (and the global ones)
        come whole from one parent."""
        va, vb = self.encode(a), self.encode(b)
        take_a = rng.random(self._n_units) < 0.5
        child = np.where(take_a[self._unit_of_free], va, vb).astype(np.int16)
        # a child that is a parent's canonical vector decodes to that parent (decoding reads
        # what it read before): the parent itself, not decoded again (14 % of a BERT-base
        # tune's crossovers: the same parent drawn twice, or every segment from one side)
        for p, v in ((a, va), (b, vb)):
            if self._decoded_here(p) and np.array_equal(child, v):
                return p
        return self._decode_marked(child)

    # ---- projection ----------------------------------------------------------------------
    def project(self, schedule: GraphSchedule) -> Projection:
        """Map a valid schedule into the space exactly, or say why it cannot be.

        The parameters found are decoded and the result compared with the input by
        :meth:`GraphSchedule.structural_key`: a projection is exact or refused.
        """
        from search_space._project import NotInSpace, project

        known = self._known(schedule)
        if known is not None:
            vec = known[0].copy()
            return Projection(schedule, vec, self._params(vec, known[1]))
        try:
            candidates = project(self, schedule)
        except NotInSpace as exc:
            return Projection(None, reason=str(exc))
        want = schedule.structural_key()
        reason = "no candidate"
        for k, full in enumerate(candidates):
            vec = self._to_free(full)
            s, canon, active = self._decode_free(vec)
            got = s.structural_key()
            if got == want:
                return Projection(s, canon.copy(), self._params(canon, active))
            if k == 0:
                reason = _first_difference(got, want)
        return Projection(None, reason=reason)

    def project_nearest(self, schedule: GraphSchedule) -> Projection:
        """:meth:`project`, or where that refuses only because a step's scope does not follow
        on this space's capacity walk, the schedule with the scopes the walk allows.

        For a schedule made for another target (a larger L1): its groups, shapes, core
        orders and order are kept, and a result the walk cannot keep where the schedule
        put it goes to the nearest scope decoding gives (``search_space._project.project``
        with ``nearest``). ``reason`` is None for an exact projection, else what differs
        (the exact projection's refusal); ``schedule`` is None when even that fails. The
        result is decoded, so it is this space's, but it may still overflow: the caller
        checks.
        """
        from search_space._project import NotInSpace, project

        exact = self.project(schedule)
        if exact.schedule is not None:
            return exact
        try:
            candidates = project(self, schedule, nearest=True)
        except NotInSpace as exc:
            return Projection(None, reason=str(exc))
        s, canon, active = self._decode_free(self._to_free(candidates[0]))
        return Projection(s, canon.copy(), self._params(canon, active), reason=exact.reason)

    def _params(self, vec: np.ndarray, active: Sequence[int]) -> dict[str, Any]:
        # the values as ints once, the names and choices from lists (every pick of a round
        # makes its parameters: ~600 numpy scalar reads and attribute look-ups on BERT-base)
        values = vec.tolist()
        names, choices = self._free_names, self._free_choices
        return {names[f]: choices[f][values[f]] for f in active}

    def _to_free(self, free: dict[int, int]) -> np.ndarray:
        vec = np.zeros(len(self.free), dtype=np.int16)
        for f, v in free.items():
            vec[f] = v
        return vec

    # ---- checks and reporting --------------------------------------------------------------
    def precheck(self, schedule: GraphSchedule) -> Check:
        """Structure (``GraphSchedule.validate``; skipped for schedules this space decoded,
        valid by construction, which are marked valid so the simulator skips it too:
        ``compiler._validate.mark_valid``) and capacity (:func:`compiler.capacity.check_capacity`,
        the simulator's own model, without timing)."""
        from compiler._validate import mark_valid
        from compiler.capacity import check_capacity

        try:
            graph = self.graph_for(schedule.batch)
        except SpaceError as exc:
            return Check(False, "structure", str(exc))
        if not self._decoded_here(schedule):
            try:
                schedule.validate(graph, self.target)
            except ScheduleError as exc:
                return Check(False, "structure", str(exc))
        else:  # the simulator then takes it as valid too (compiler._validate.mark_valid)
            mark_valid(schedule, graph, self.target)
        issue = check_capacity(graph, schedule, self.target)
        if issue is not None:
            return Check(False, "capacity", issue.message)
        return Check(True)

    def size(self, ties: bool | None = None) -> float:
        """log10 of the number of points of the space (with or without ties).

        Every parameter counts its choices, except that a cut point counts two
        (boundary or not) and the granularity one: they only say which cut points
        are boundaries. An upper bound on distinct schedules: inactive parameters
        and repairs make some points decode alike.
        """
        use = self.options.ties if ties is None else ties
        rep = self._ties_tied if use else self._ties_untied
        free = sorted(set(rep.tolist()))
        states = {"cut": 2, "granularity": 1}
        return float(sum(math.log10(states.get(self.dims[d].kind, len(self.dims[d].choices)))
                         for d in free))

    def describe(self) -> dict[str, Any]:
        """Dimensions, their counts and choices, the structure found and the sizes."""
        st = self.structure
        kinds: dict[str, dict[str, Any]] = {}
        for d in self.free:
            k = kinds.setdefault(d.kind, {"count": 0, "choices": set(), "help": KIND_HELP[d.kind]})
            k["count"] += 1
            k["choices"].update(d.choices)
        classes: dict[str, int] = {}
        for sig in st.signature:
            classes[sig] = classes.get(sig, 0) + 1
        return {
            "model": self.graph.name,
            "batch": self.batch,
            "batch_choices": list(self.batches),
            "ops": len(self.graph.ops),
            "segments": len(st.segments),
            "cut_points": len(st.segments) - 1,
            "anchors": len(st.anchors),
            "group_starts": len(st.starts),
            "repeated_segment_classes": sum(1 for c in classes.values() if c > 1),
            "segments_in_repeats": sum(c for c in classes.values() if c > 1),
            "options": self.options.to_json(),
            "dimension": len(self.free),
            "dimensions": {
                k: {"count": v["count"], "choices": sorted(v["choices"], key=str), "help": v["help"]}
                for k, v in kinds.items()
            },
            "log10_size": self.size(),
            "log10_size_untied": self.size(False),
            "log10_size_tied": self.size(True),
        }


def _first_difference(a: tuple[Any, ...], b: tuple[Any, ...]) -> str:
    labels = ("batch", "groups", "transfers", "order")
    for label, x, y in zip(labels, a, b):
        if x != y:
            if label == "groups" and len(x) == len(y):
                for gx, gy in zip(x, y):
                    if gx != gy:
                        return f"group at op {gy[0][0]}: the space gives {gx[1:]} for {gy[1:]}"
            return f"the nearest point of the space differs in its {label}"
    return "differs"


def build_space(graph: Graph, target: Target, batch: int | None = None,
                options: SpaceOptions | None = None,
                graph_at: Callable[[int], Graph] | None = None) -> Space:
    """The search space of ``graph`` (one NPU function) at ``batch`` on ``target``.

    Deterministic: the same graph, target, batch and options give the same
    parameter names, choices and order.

    Args:
        graph: The model's graph (or one NPU sub-function of it: :func:`build_spaces`).
        target: The chip.
        batch: The batch (default: the graph's). A different batch, or
            ``options.batch_choices``, needs ``graph_at``.
        options: See :class:`SpaceOptions`.
        graph_at: Returns the same model at another batch (e.g. from
            ``Model.set_batch``); needed only for other batches.

    Raises:
        SpaceError: an empty graph, a bad option or a batch without a graph.
    """
    opts = options or SpaceOptions()
    if not graph.ops:
        raise SpaceError(f"{graph.name}: the graph has no ops, there is nothing to schedule")
    if opts.min_group_ops < 1 or (opts.max_group_ops is not None and opts.max_group_ops < 1):
        raise SpaceError("min_group_ops and max_group_ops must be >= 1")
    if opts.max_split < 1:
        raise SpaceError(f"max_split must be >= 1, got {opts.max_split}")
    if any(b < 1 for b in opts.batch_choices):
        raise SpaceError(f"batch choices must be >= 1, got {list(opts.batch_choices)}")
    b = graph.batch if batch is None else batch
    if b < 1:
        raise SpaceError(f"batch must be >= 1, got {b}")
    if opts.batch_choices and b not in opts.batch_choices:
        opts = replace(opts, batch_choices=tuple(sorted({*opts.batch_choices, b})))
    space = Space(graph, target, b, opts, graph_at)
    for bb in space.batches:
        space.graph_for(bb)
    return space


def build_spaces(graph: Graph, target: Target, batch: int | None = None,
                 options: SpaceOptions | None = None) -> list[Space]:
    """One space per NPU sub-function (CPU ops between them run on the host)."""
    subs = graph.npu_subfunctions()
    if len(subs) == 1 and len(subs[0]) == len(graph.ops):
        return [build_space(graph, target, batch, options)]
    if not hasattr(graph, "subgraph"):
        raise SpaceError("this graph has CPU ops between NPU functions and Graph.subgraph "
                         "is not available to cut them apart")
    return [build_space(graph.subgraph(ops), target, batch, options) for ops in subs]
