"""The guided sampler's end game: a model-ranked hill climb around the best measured schedule.

Evolution (:mod:`autotune.sampling._breed`) draws moves at random around the best
schedules, so near the end of a tune the best's one-move neighbours that would improve
it may never be drawn: measured on MobileNetV2 b16, 1,000 measurements ended 0.6 % above
a schedule an earlier run had found, and a sweep's variants ended 1-3 % behind their cold
tune (``bench/results/tuning.md``, ``bench/results/sweep.md``). *Polishing* is the
systematic answer (a first-improvement local search, as a careful user would finish by
hand):

* **When**: the best has not improved for ``GuidedOptions.polish_after`` measurements,
  or the best was itself found by polishing (the climb goes on from the new best).
  "Improved": by more than ``GuidedOptions.polish_tol`` of it (:func:`beats`; 0 by
  default, any gain; :data:`STALL_TOL`: a float tie with the best is none).
* **What**: the one-move neighbourhood of the best
  (:func:`search_space._neighbours.neighbour_vectors`: every child one
  :meth:`Space.mutate` move can make), in a fixed shuffled order per schedule; a polish
  round decodes a window of it (``window`` more each round, or under the sampler's
  ``screen`` that many more per candidate the round proposes; cumulative over the rounds
  of this schedule: decoding is lazy, a worker remembers what it decoded), drops what was
  measured or handed out, ranks the rest by the cost model and proposes the best that
  pass the capacity pre-check.
* **Until**: the whole neighbourhood was proposed (or ``polish_limit`` of it), the
  schedule is then *polished* and evolution takes over again; or the best improves,
  and the new best is polished next.
* **Then its second ring** (``GuidedOptions.polish_deep``, 48 proposals per schedule; 0:
  none): the same climb through :mod:`autotune.sampling._deep`'s ring: first every
  group boundary moved between its neighbours *with its group's parameters*
  (``carried_moves``: a one-move ``boundary`` leaves them behind), then a new group
  boundary together with every shape of the new group (``split_reshape``: a split the
  one-move ``split_group`` makes neutral, since the new group inherits its parent's
  shape), decoded lazily in a window as above, ranked by the cost model. Its rounds are booked
  and marked under :func:`deep_key` (``deep:<cid>``), with their own limit (a resumed
  tune counts its predecessor's against it). A best found by a second ring polishes its
  own second ring first, then its first. Why: 2-worker MobileNetV2 b16 tunes stalled at
  1,507-1,516 µs in O3's basin, two moves from better schedules that are each neutral or
  worse alone; with the ring, four 2-worker runs ended at 1,499.2-1,501.8 µs (main
  1,507.2-1,513.0 in the same minutes; ``bench/results/tuning.md``, h82).
* **Then, if it stays stalled, kicks** (an iterated local search; ``GuidedOptions.polish_kick``
  and ``kick_limit``; off by default: see :class:`autotune.sampling.GuidedOptions`), every
  other round: one of the best's kicks
  (:func:`search_space._neighbours.kick_vectors`: a group boundary moved 2 to 4 cut
  points at once), the model's first not measured, is measured, and then *climbed*:
  polished with its split-factor, boundary and merge moves proposed first
  (:data:`autotune.sampling._breed.CLIMB_FIRST`), ``kick_limit`` proposals
  per schedule of the climb, moving on while it improves on itself. A climb that ends
  below the best made a new best (polished as any); otherwise the next kick. Why: on
  MobileNetV2 b16 the tuned bests' last-group boundary (op 41, O3's) sits where every
  one-step move of it is 2-5 % slower, while the same boundary 3-4 cut points earlier,
  with the boundaries after it merged, is another, better basin (1,513.0 -> 1,510.0 µs
  and 1,504.5 -> 1,503.4 µs by a kick and three steps of steepest descent measured by
  the simulator, ``bench/results/tuning.md``).

Measured (``bench/results/sweep.md``, ``tuning.md``, 2026-11-27): in a MobileNetV2 sweep
the climb took L1 512K / DDR 13 from 1,935.7 to 1,889.0 µs (0.972 to 0.996 of its cold
tune) and made 8 of the sweep's 59 improvements; on ResNet-50 b16 at 1,000
measurements it made 6 of the last 7 (6,833.9 to 6,791.0 µs). Where the best is a local
optimum it finds nothing, and a better schedule in another basin (other group
boundaries) is evolution's to find.

The state (:class:`PolishState`) is what the sampler learned from the trials: the
measurements since the best improved, which trials were polish proposals (the trial
user attribute ``graphtune_polish``, so a tune resumed from its study journal goes on
climbing; the log's records carry it too, as ``prov.polish_of``, so a trial rebuilt from
the log alone keeps it), and how far each schedule's neighbourhood was proposed. A
resumed tune counts the polish measurements of its predecessor against ``polish_limit``
(a schedule with ``polish_limit`` of them measured is polished), but forgets the
window: its first polish round of a schedule starts its window again, the candidates
measured before are dropped as seen, and the remaining ones of the ``polish_limit``
proposals are the next in the (retrained) model's ranking. A sweep's later chunk of a variant is such
a resumed tune: in the MobileNetV2 sweep of 2026-11-27, 49-82 polish measurements
followed the last improvement of four variants.
"""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from autotune.sampling._studies import candidate_id

if TYPE_CHECKING:
    from compiler.schedule import GraphSchedule
    from search_space import Space

__all__ = ["DEEP", "POLISH_ATTR", "PROV_POLISH", "STALL_TOL", "PolishState", "beats", "deep_key",
           "is_deep", "polish_ranked", "ring_of"]

STALL_TOL = 1e-6
"""A gain smaller than this share of the best is none: a tie (float noise), not a new best.
Asked by the sweep's stall test (:func:`autotune.whatif._budget.stalled`: a chunk that gained
less left the best as it was, for its kicks and its lending) and, when an option says so, by
:class:`PolishState` (``GuidedOptions.polish_tol``: a measurement that beats the best by less
is not a new best, ``since_best`` goes on counting, so the second ring and the kicks come; 0
by default: ``tune``'s 300-trial BERT-base b8 log changes at its 86th record with it, and a
sweep with it did no better: ``bench/results/sweep.md``, twenty-fourth pass).

Why this size: a gain nobody would measure. The STCP920 runs at 1 GHz (a cycle is 1 ns), so a
millionth of a sweep's bests is a cycle or two of MobileNetV2 b16's ~1,500 µs and ~10 of
ResNet-50 b16's ~9,500 µs, four orders under the 10 µs the simulator charges each inference's
launch on the host, while the weighted sum of the tasks' bests moves by float noise (~1e-16 of
it) when a candidate ties the best. Why at all (``bench/results/sweep.md``, twenty-second to
twenty-fourth passes): ResNet-50 b16 seed 0's L1 384K / DDR 27, the sweep's one miss, gained
1e-12 µs in its third chunk (9,518.163398148146 -> ...145); with no tolerance the sweep's
``stalled`` never held, and with it there (twenty-third pass) the polish still took that tie
for a new best, reset ``since_best`` and so no kick round came in the kicked chunk (with the
polish's tolerance too it came, and gained nothing: twenty-fourth pass)."""


def beats(y: float, best: float, tol: float = STALL_TOL) -> bool:
    """Whether speed ``y`` (higher: faster) is a new best over ``best``: higher by more than
    ``tol`` of it (:data:`STALL_TOL`); anything finite beats a best of ``-inf`` (none yet)."""
    return y > best + tol * abs(best) if np.isfinite(best) else y > best

POLISH_ATTR = "graphtune_polish"
"""Trial user attribute of a polish proposal (value: the polished schedule's candidate id)."""

PROV_POLISH = "polish_of"
"""The same mark in a log record: a key of ``prov`` (kept in :attr:`logs.Provenance.extra`,
written only on a polish proposal's record), so a tune resumed from its log alone knows
its polish finds (:func:`autotune.running._reconcile.reconcile` sets :data:`POLISH_ATTR`
on the trials it rebuilds from the log)."""


@dataclass
class _Hood:
    """A schedule's neighbourhood on this process: vectors in their fixed order, and what
    decoding them gave (None: not decoded yet; ``""``: the parent itself or a repeat)."""

    vectors: Sequence[np.ndarray]
    decoded: list[tuple[str, GraphSchedule] | None]
    moves: list[str] = field(default_factory=list)
    rows: dict[tuple[str, str], np.ndarray] = field(default_factory=dict)


DEEP = -1
"""``kick`` of a polish round of the second ring (:mod:`autotune.sampling._deep`)."""

_HOODS: weakref.WeakKeyDictionary[Space, dict[bytes, _Hood]] = weakref.WeakKeyDictionary()
_MAX_HOODS = 4  # per space: the incumbents a worker is polishing (one at a time, mostly)


def _hood(space: Space, parent: np.ndarray, schedule: GraphSchedule, kick: int = 0) -> _Hood:
    from search_space._neighbours import kick_vectors, neighbour_vectors

    memo = _HOODS.get(space)
    if memo is None:
        memo = _HOODS[space] = {}
    key = np.asarray(parent, dtype=np.int64).tobytes()
    if kick:
        key = b"kick%d:" % kick + key
    hood = memo.get(key)
    if hood is None:
        if kick == DEEP:  # the second ring (built lazily: thousands of vectors)
            from autotune.sampling._deep import carried_moves, split_reshape

            carried = carried_moves(space, schedule)  # first, in their order: a few dozen
            ring = split_reshape(space, schedule)
            both = _Shuffled(ring, _order(key, len(ring)), carried)
            hood = _Hood(both, [None] * len(both), ["deep"] * len(both))
        else:
            listed = (kick_vectors(space, schedule, kick) if kick
                      else neighbour_vectors(space, schedule))
            vecs = [v for _, v in listed]
            order = _order(key, len(vecs))
            hood = _Hood([vecs[int(k)] for k in order], [None] * len(vecs),
                         [listed[int(k)][0] for k in order])
        if len(memo) >= _MAX_HOODS:
            memo.pop(next(iter(memo)))
        memo[key] = hood
    return hood


def _order(key: bytes, n: int) -> np.ndarray:
    """A fixed order per schedule (the same on every worker), not the moves' order: a
    window of it is a sample of every kind of move."""
    seed = int.from_bytes(hashlib.sha256(key).digest()[:8], "little")
    return np.random.default_rng(seed).permutation(n)


class _Shuffled(Sequence[np.ndarray]):
    """``head``, then ``items`` read in ``order`` (each built when read)."""

    def __init__(self, items: Sequence[np.ndarray], order: np.ndarray,
                 head: Sequence[np.ndarray] = ()) -> None:
        self.items, self.order, self.head = items, order, head

    def __len__(self) -> int:
        return len(self.head) + len(self.order)

    def __getitem__(self, k):  # type: ignore[no-untyped-def, override]
        if k < len(self.head):
            return self.head[k]
        return self.items[int(self.order[k - len(self.head)])]


@dataclass(frozen=True)
class Polished:
    """A polish round's ranking: ``(key, cid, schedule)`` best first, and the size of the
    polished schedule's neighbourhood (vectors, before decoding)."""

    ranked: list[tuple[float, str, GraphSchedule]]
    size: int
    decoded: int


def polish_ranked(space: Space, parent: np.ndarray, parent_schedule: GraphSchedule,
                  window: int, fresh: Callable[[str], bool],
                  features: Callable[[Sequence[tuple[str, GraphSchedule]]], list[np.ndarray]],
                  predict: Callable[[np.ndarray], np.ndarray], scorer_kind: str,
                  by_model: bool, kick: int = 0, first: frozenset[str] = frozenset()
                  ) -> Polished:
    """Rank the first ``window`` of ``parent``'s neighbours not seen yet.

    ``fresh(cid)``: not measured, queued or handed out. ``features`` computes rows (they
    are remembered with the neighbourhood, per ``scorer_kind``); ``predict`` scores rows
    (higher: faster). Without a model (``by_model`` false) the fixed order ranks.
    ``kick``: rank ``parent``'s kicks instead (:func:`search_space._neighbours.kick_vectors`
    with that span), those that decode to one group more or less than ``parent`` at most
    (a 2-worker MobileNetV2 tune spent 96 measurements climbing from a "kick" that
    decoded to one group per operator, 23,632 µs). ``first``: the neighbours by these
    moves come first (each part in the model's order): a kicked climb's. ``kick`` =
    :data:`DEEP`: rank ``parent``'s second ring instead (:mod:`autotune.sampling._deep`: its
    carried boundary moves first, then a new boundary with the new group's own shape).
    """
    hood = _hood(space, parent, parent_schedule, kick)
    own = candidate_id(parent_schedule)
    decoded = 0
    seen_here: set[str] = {own}
    items: list[tuple[str, GraphSchedule]] = []
    lead: set[str] = set()  # items by a move of ``first``
    for k in range(min(window, len(hood.vectors))):
        got = hood.decoded[k]
        if got is None:
            s = space.decode(hood.vectors[k])
            decoded += 1
            got = hood.decoded[k] = (candidate_id(s), s)
        cid, s = got
        if cid in seen_here:
            continue
        seen_here.add(cid)
        if kick > 0 and abs(len(s.groups) - len(parent_schedule.groups)) > 1:
            continue  # not one boundary moved (a cut point of another granularity)
        if fresh(cid):
            items.append((cid, s))
            if hood.moves[k] in first:
                lead.add(cid)
    if not items:
        return Polished([], len(hood.vectors), decoded)
    if not by_model:
        return Polished([(float(k), cid, s) for k, (cid, s) in enumerate(items)],
                        len(hood.vectors), decoded)
    todo = [(cid, s) for cid, s in items if (scorer_kind, cid) not in hood.rows]
    for (cid, _), row in zip(todo, features(todo)):
        hood.rows[(scorer_kind, cid)] = row
    x = np.stack([hood.rows[(scorer_kind, cid)] for cid, _ in items])
    scores = np.asarray(predict(x), dtype=np.float64)
    order = np.argsort(-scores, kind="stable")
    if lead:
        order = np.asarray(sorted(order, key=lambda k: items[int(k)][0] not in lead))
    return Polished([(-float(scores[int(k)]), *items[int(k)]) for k in order],
                    len(hood.vectors), decoded)


class PolishState:
    """What the sampler knows of its hill climb (see the module doc).

    Args:
        after: Measurements without a better best before polishing starts.
        limit: Proposals per polished schedule at most (None: its whole neighbourhood).
        window: Neighbours a polish round adds to the ranked window of its schedule.
        kick: 0, or the iterated local search once the best is polished and still
            stalled: a *kick* round proposes one of the best's kicks (a boundary moved
            by 2 to ``kick`` cut points, the model's first not measured), then the
            kicked schedule is climbed (polished, each schedule of the climb with
            ``kick_limit`` proposals at most) while the climb improves on itself; a
            climb that ends below the best has made a new best, which is polished as
            any. Then the next kick.
        kick_limit: Proposals per schedule of a kicked climb.
        tol: A measurement is a new best when faster than the best by more than this
            share of it (:func:`beats`; 0, ``tune``'s: any gain; a sweep's
            :data:`STALL_TOL`: a float tie is not one).
        deep: 0, or once a schedule's one-move neighbourhood is polished, its *second
            ring* (:mod:`autotune.sampling._deep`: a boundary moved with its group's
            parameters, a new boundary with a shape of its own) is polished the same
            way, ``deep`` proposals at most, before any kick; a better schedule found
            there is polished next, its second ring first (the move that paid, again:
            MobileNetV2 b16's better schedules are a few new groups, each with its own
            shape), then its first.
    """

    def __init__(self, after: int, limit: int | None, window: int, kick: int = 0,
                 kick_limit: int | None = 32, deep: int = 0, tol: float = 0.0) -> None:
        self.after, self.limit, self.window, self.tol = after, limit, window, tol
        self.kick, self.kick_limit, self.deep = kick, kick_limit, deep
        self.since_best = 0  # measurements since the best improved
        self.best: str = ""  # candidate id of the best measured
        self._best_y = -np.inf
        self.found: set[str] = set()  # candidates proposed by polishing
        self.done: set[str] = set()  # schedules whose neighbourhood was proposed
        self._offered: dict[str, int] = {}  # schedule -> its neighbours proposed so far
        # schedule -> its neighbours measured as polish proposals of another process (a
        # resumed tune's predecessor): they count against ``limit`` as this one's do
        self._inherited: dict[str, int] = {}
        self._window: dict[str, int] = {}  # schedule -> the window its last round ranked
        self._by_deep: set[str] = set()  # candidates proposed by a second ring
        self.out: str = ""  # the schedule a polish round is out for ("": none)
        self.rounds = 0  # polish rounds requested (for reports)
        # the iterated local search: the head of the kicked climb, its speed, the kick
        # proposals not measured yet, the climbs' schedules, the bests whose kicks ran out
        self.head: str = ""
        self._head_y = -np.inf
        self._waiting: set[str] = set()
        self._climbed: set[str] = set()
        self.kicked_out: set[str] = set()
        self.kicks = 0  # kick rounds requested (for reports)

    def measured(self, cid: str, y: float | None, polish_of: str = "",
                 inherited: bool = False) -> None:
        """A measurement arrived (``y``: speed, None: failed); ``polish_of``: the
        schedule whose polish proposed it ("": not a polish proposal); ``inherited``: it
        was not proposed by this process (a resumed tune reading its predecessor's
        trials), so it counts against ``limit`` here."""
        if polish_of:
            self.found.add(cid)
            if is_deep(polish_of):
                self._by_deep.add(cid)
            if inherited:
                self._inherited[polish_of] = self._inherited.get(polish_of, 0) + 1
                self._check_limit(polish_of)
        if y is not None and beats(y, self._best_y, self.tol):
            self._best_y, self.best, self.since_best = y, cid, 0
        else:
            self.since_best += 1
        if cid in self._waiting:  # a kick: the climb starts from the best of its kicks
            self._waiting.discard(cid)
            if y is not None and y > self._head_y:
                self.head, self._head_y = cid, y
                self._climbed.add(cid)
        elif polish_of and polish_of == self.head and y is not None and y > self._head_y:
            self.head, self._head_y = cid, y  # the climb goes on from there
            self._climbed.add(cid)

    def due(self) -> tuple[str, str]:
        """``(schedule, kind)`` of the next round: ``"polish"`` (the best, or the head
        of a kicked climb), ``"deep"`` (the best's second ring: ``schedule`` is its
        :func:`deep_key`) or ``"kick"`` (the best's next kick); ``("", "")``: none, or
        one is out already."""
        if self.after < 0 or not self.best or self.out:
            return "", ""
        rings = [(self.best, "polish")]
        if self.deep:  # the second ring: first where the best was found by one
            ring = (deep_key(self.best), "deep")
            rings = [ring, *rings] if self.best in self._by_deep else [*rings, ring]
        todo = [r for r in rings if r[0] not in self.done]
        if todo:
            if self.since_best >= self.after or self.best in self.found:
                return todo[0]
            return "", ""
        if not self.kick or self.since_best < self.after or self._waiting:
            return "", ""
        if self.head and self.head not in self.done:
            return self.head, "polish"
        if self.best in self.kicked_out:
            return "", ""
        return self.best, "kick"

    def start(self, cid: str, kind: str = "polish", step: int | None = None) -> int:
        """A round of ``kind`` for ``cid`` is requested: the window it ranks, ``step``
        (default ``window``) more of ``cid``'s neighbours than its last round's (the
        sampler's screening budget: :meth:`GuidedSampler._polish_step`)."""
        self.out = cid
        if kind == "kick":
            self.kicks += 1
            return 1 << 20  # every kick is ranked (a few dozen)
        self.rounds += 1
        w = self._window[cid] = self._window.get(cid, 0) + max(
            1, self.window if step is None else step)
        return w

    def back(self, cid: str, proposed: int, size: int, window: int) -> None:
        """The round came back having proposed ``proposed`` new candidates out of a
        neighbourhood of ``size`` ranked up to ``window`` (``cid``: a schedule, or its
        :func:`deep_key` for its second ring)."""
        if self.out == cid:
            self.out = ""
        self._offered[cid] = self._offered.get(cid, 0) + proposed
        if proposed == 0 and window >= size:
            self.done.add(cid)
        self._check_limit(cid)

    def kicked(self, cid: str, picks: Sequence[str]) -> None:
        """A kick round of ``cid`` came back with ``picks`` (none: its kicks ran out)."""
        if self.out == cid:
            self.out = ""
        if not picks:
            self.kicked_out.add(cid)
        self.head, self._head_y = "", -np.inf
        self._waiting = set(picks)

    def climbing(self, cid: str) -> bool:
        """Whether ``cid`` is (or was) the head of a kicked climb."""
        return cid in self._climbed

    def room(self, cid: str) -> int | None:
        """Proposals left to a second ring's rounds (:func:`deep_key`) under ``deep``: a
        round proposes no more (None: any other round, whose limit is checked after it)."""
        if not is_deep(cid):
            return None
        return max(0, self.deep - self._offered.get(cid, 0) - self._inherited.get(cid, 0))

    def _check_limit(self, cid: str) -> None:
        total = self._offered.get(cid, 0) + self._inherited.get(cid, 0)
        if is_deep(cid):
            limit: int | None = self.deep
        else:
            limit = self.kick_limit if cid in self._climbed and cid != self.best else self.limit
        if limit is not None and total >= limit:
            self.done.add(cid)

    def lost(self) -> None:
        """The round was lost (its worker died)."""
        self.out = ""


_DEEP_PREFIX = "deep:"


def deep_key(cid: str) -> str:
    """The name of ``cid``'s second ring (:mod:`autotune.sampling._deep`): what its rounds
    are booked under in :class:`PolishState` (its own ``deep`` limit) and what its
    proposals are marked with (the trial attribute :data:`POLISH_ATTR`, the record's
    ``prov.polish_of``), so a resumed tune counts them against that limit."""
    return _DEEP_PREFIX + cid


def is_deep(mark: str) -> bool:
    """Whether a polish mark is a second ring's (:func:`deep_key`)."""
    return mark.startswith(_DEEP_PREFIX)


def ring_of(mark: str) -> str:
    """The schedule a polish mark is about (its own, or its second ring's)."""
    return mark[len(_DEEP_PREFIX):] if is_deep(mark) else mark
