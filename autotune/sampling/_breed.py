"""One round of the guided sampler's breeding, runnable wherever the task's space is.

Breeding is most of a guided tuning job's work (every child is decoded, featurised
and, if picked, pre-checked: ~17 ms each on ResNet-50), so it is a job of its own:
the sampler describes a round as a small :class:`BreedRequest` (its best measured
schedules as vectors, an RNG seed, how many to propose, the candidates it has seen)
and :func:`breed` returns the picked candidates with what the driver needs
(:class:`Bred`: vector, Optuna parameters, schedule, cost-model features), so the
driver never decodes. The driver runs it on the measurer workers
(:meth:`autotune.running._pool.MeasurePool.submit_breed`, pipelined with the measurement
batches); with ``--workers 0`` the same code runs in-process, and the same request
gives the same answer anywhere.

The cost model travels as a :class:`Scorer`: a picklable snapshot of the model
(:meth:`autotune.sampling._ranker.CostModelRanker.snapshot`), or the ranker itself in-process.
A candidate's feature row is computed once per space while kept (``_ROWS``, by candidate
id, over rounds) when the scorer's rows are ``cost_model.features`` of the space's graph
and target: a function of the schedule alone (a polish round ranks the same best's
neighbours again; parents come back round after round).
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from itertools import islice
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from autotune.sampling._studies import candidate_id

if TYPE_CHECKING:
    from collections.abc import Mapping

    from compiler.graph import Graph
    from compiler.schedule import GraphSchedule
    from compiler.target import Target
    from search_space import Space

__all__ = ["Bred", "BreedRequest", "Breeder", "Pick", "RankerScorer", "Scorer", "breed"]


class Scorer(Protocol):
    """What breeding needs of a cost model: features of schedules of a space, and scores.

    Attributes:
        label: What ranks (``"xgb/n=64"``, ``"analytical"``); ``""`` while its scores
            are random (breeding then searches near the best measured schedules).
    """

    label: str

    def features(self, space: Space, schedules: Sequence[GraphSchedule]) -> np.ndarray:
        """One row per schedule."""
        ...

    def predict(self, x: np.ndarray) -> np.ndarray:
        """A score per row, higher = predicted faster."""
        ...


class RankerScorer:
    """A :class:`autotune.sampling._ranker.Ranker` used in place (in-process breeding)."""

    def __init__(self, ranker: Any) -> None:
        self._ranker = ranker
        self.label: str = ranker.label

    def features(self, space: Space, schedules: Sequence[GraphSchedule]) -> np.ndarray:
        return np.asarray(self._ranker.features(list(schedules)), dtype=np.float32)

    def predict(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(self._ranker.predict(x), dtype=np.float64)


@dataclass(frozen=True)
class BreedRequest:
    """One round (see :class:`autotune.sampling._guided.GuidedOptions` for the knobs).

    Attributes:
        batch: The batch of the task's space.
        parents: The best measured schedules as space vectors, best first.
        seed: Seeds the round's randomness.
        proposals: Candidates to pick.
        eps: Of which picked at random among the bred ones the model passed over.
        seen: Candidate ids not to pick (measured, queued or handed out), beyond
            ``seen_base``.
        population, generations, random_share, crossover: The evolution's knobs.
        seen_base: More candidate ids not to pick: the bulk of them, the same object over
            many requests (a pool may send it ahead and put a reference to it here; the
            worker puts the set back before breeding).
        polish: 0, or a polish round (:mod:`autotune.sampling._polish`): rank the first
            ``polish`` one-move neighbours of ``parents[0]`` not seen (no evolution, no
            random picks).
        polish_of: The candidate id of ``parents[0]`` in a polish round.
        kick: 0, or (with ``polish``) a kick round: rank ``parents[0]``'s kicks (a
            boundary moved by 2 to ``kick`` cut points) instead of its neighbours.
        climb: A polish round of a kicked climb: the neighbours by the moves of
            :data:`CLIMB_FIRST` come first.
    """

    batch: int
    parents: tuple[np.ndarray, ...]
    seed: int
    proposals: int
    eps: int
    seen: frozenset[str]
    population: int
    generations: int
    random_share: float
    crossover: float
    seen_base: Any = frozenset()
    polish: int = 0
    polish_of: str = ""
    kick: int = 0
    climb: bool = False


@dataclass(frozen=True)
class Pick:
    """A picked candidate: all the driver needs to ask, measure and learn from it.

    ``key`` orders the model's picks of a round (lower first: minus the predicted score,
    or the parent's rank near the start); ``explore`` marks the random picks.

    ``json``: the schedule's JSON, when a :class:`Breeder` bred it (None from :func:`breed`
    alone). Such a pick travels (is pickled) as its JSON, not as the schedule's objects:
    the driver sends and logs the JSON and never reads the objects, so its ``schedule``
    there is parsed from the JSON only if read (:func:`schedule_of_json`). Pickling the
    objects, unpickling them and writing their JSON again on the driver cost ~0.47 ms of
    CPU a measurement on gpt1 against ~0.13 for the JSON (issue 20).
    """

    cid: str
    vector: np.ndarray
    params: dict[str, Any]
    schedule: GraphSchedule
    features: np.ndarray
    ranked_by: str
    key: float
    explore: bool
    json: dict[str, Any] | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        fields = (self.cid, self.vector, self.params, self.schedule, self.features,
                  self.ranked_by, self.key, self.explore, self.json)
        if self.json is None:
            return (Pick, fields)
        return (_arrived, fields[:3] + fields[4:])


def _arrived(cid: str, vector: np.ndarray, params: dict[str, Any], features: np.ndarray,
             ranked_by: str, key: float, explore: bool, json: dict[str, Any]) -> Pick:
    """A pick unpickled from its JSON (see :class:`Pick`)."""
    return Pick(cid, vector, params, schedule_of_json(json), features, ranked_by, key, explore,
                json)


class _Parsed:
    """A :class:`compiler.codes.ScheduleSource` that parses a schedule's JSON when first read
    (it has no codes: a consumer walks its objects)."""

    __slots__ = ("_json", "_schedule")

    def __init__(self, json: dict[str, Any]) -> None:
        self._json = json
        self._schedule: GraphSchedule | None = None

    def _parsed(self) -> GraphSchedule:
        if self._schedule is None:
            from compiler.schedule import GraphSchedule

            self._schedule = GraphSchedule.from_json(dict(self._json))  # (a Mapping: ScheduleText)
        return self._schedule

    def codes(self) -> None:
        return None

    def objects(self) -> tuple[Any, Any, Any]:
        s = self._parsed()
        return s.groups, s.transfers, s.order

    def key_text(self) -> str:
        from compiler.key_text import key_text

        return key_text(self._parsed())


def schedule_of_json(json: dict[str, Any]) -> GraphSchedule:
    """The schedule ``json`` writes, parsed from it when a field other than ``batch``,
    ``workload_key``, ``source`` or ``version`` is first read (a
    :class:`compiler.codes.LazySchedule`); the JSON must be a schedule's own
    ``to_json()`` (a pick's), which the parse checks as ``GraphSchedule.from_json`` does."""
    from compiler.codes import LazySchedule
    from compiler.schedule import SCHEMA_VERSION, GraphSchedule

    if json.get("v") != SCHEMA_VERSION:
        return GraphSchedule.from_json(json)
    return LazySchedule.deferred(json["batch"], json.get("workload_key"),
                                 str(json.get("source", "")), _Parsed(json))


@dataclass(frozen=True)
class Bred:
    """A round's result: the picks in proposal order, how many were ranked, CPU seconds,
    how many candidates were decoded (bred or sampled) and the wall seconds it took (what
    the sampler weighs against a measurement's time: ``GuidedOptions.breed_budget``).
    A polish round also says which schedule it polished, the size of its neighbourhood
    and the window it ranked (``BreedRequest.polish``)."""

    picks: tuple[Pick, ...]
    ranked: int
    cpu_s: float
    decoded: int = 0
    wall_s: float = 0.0
    polish_of: str = ""
    neighbourhood: int = 0
    window: int = 0
    kick: bool = False


def breed(space: Space, scorer: Scorer, req: BreedRequest) -> Bred:
    """Breed, rank and pick one round (Ansor's evolutionary search with a cost model).

    A population of the parents and uniform samples evolves for ``generations``
    (parents drawn by predicted rank, children by mutation or crossover); the new
    candidates are ranked by the model; the best that pass the capacity pre-check are
    picked, plus ``eps`` random picks among the rest (exploration). With no model yet
    (``scorer.label == ""``) and parents, one-move neighbours of the parents are ranked
    instead, the best parent's first. A polish round (``req.polish``) ranks the best's
    one-move neighbours (:func:`autotune.sampling._polish.polish_ranked`) and picks only
    the best of them.
    """
    t0, w0 = time.process_time(), time.perf_counter()
    rng = np.random.default_rng(req.seed)
    r = _Round(space, scorer, req, rng)
    hood = 0
    if req.polish and req.parents:
        ranked, hood = r.polish()
    elif req.parents and not scorer.label:
        ranked = r.neighbours()
    else:
        ranked = r.evolve()
    picked: list[tuple[str, GraphSchedule, str, float, bool]] = []
    used = 0
    for key, cid, s in ranked:
        used += 1
        if len(picked) >= req.proposals - req.eps:
            break
        if r.admit(cid, s):
            picked.append((cid, s, scorer.label, key, False))
    # Exploration as in Ansor: random picks among the bred candidates the model passed
    # over (uniform samples of the space are mostly far slower than anything bred).
    rest = ranked[used:]
    for k in rng.permutation(len(rest)):
        if len(picked) >= req.proposals:
            break
        _, cid, s = rest[int(k)]
        if r.admit(cid, s):
            picked.append((cid, s, "", 0.0, True))
    for _ in range(0 if req.polish else 8 * max(req.eps, 1)):
        if len(picked) >= req.proposals:
            break
        s = space.sample(rng)
        cid = candidate_id(s)
        if r.admit(cid, s):
            picked.append((cid, s, "", 0.0, True))
    rows = r.features_of([(p[0], p[1]) for p in picked])
    picks = []
    for (cid, s, by, key, explore), row in zip(picked, rows):
        proj = space.project(s)  # the space remembers what it decoded: no search
        assert proj.vector is not None
        picks.append(Pick(cid, proj.vector, dict(proj.params), s, row, by, key, explore))
    return Bred(tuple(picks), len(ranked), time.process_time() - t0, r.decoded,
                time.perf_counter() - w0, req.polish_of if req.polish else "", hood, req.polish,
                bool(req.polish and req.kick))


class Breeder:
    """Breeds rounds of any task whose graph it holds (what a measurer worker keeps).

    Each task's space is built on first use (the same space the driver has: building
    is deterministic, so a vector decodes to the same schedule here and there).

    It also keeps the schedules it picked (the last :data:`HELD_PICKS`, by task and
    candidate id) until they are measured: a pick measured in the process that bred it
    is measured as the object the breeding built (:meth:`take`), whose pre-check already
    planned its memory (remembered beside it, :mod:`compiler.memo`), instead of one parsed
    again from its JSON and planned again (the last 150 picks of a ResNet-50 b16 tune:
    3.2 instead of 6.9 ms of CPU a measurement, ``bench/measure_path.py``).
    """

    def __init__(self, graphs: Mapping[str, Graph], target: Target) -> None:
        self._graphs = graphs
        self._target = target
        self._spaces: dict[tuple[str, int], Space] = {}
        # picks bred here, by task and candidate id
        self._held: dict[tuple[str, str], GraphSchedule] = {}
        # the JSON each of the last HELD_JSON picks was sent as (compared instead of written)
        self._held_json: dict[tuple[str, str], dict[str, Any]] = {}
        self.taken = 0  # picks measured as the object bred here (for benches)
        self.rebuilt = 0  # picks measured as decoded here from their vectors (for benches)

    def space(self, task_key: str, batch: int) -> Space:
        """Task ``task_key``'s space at ``batch`` (built on first use)."""
        from search_space import build_space

        space = self._spaces.get((task_key, batch))
        if space is None:
            space = build_space(self._graphs[task_key], self._target, batch)
            self._spaces[(task_key, batch)] = space
        return space

    def __call__(self, task_key: str, req: BreedRequest, scorer: Scorer) -> Bred:
        """Breed ``req``; each pick carries its schedule's JSON (what it travels as, see
        :class:`Pick`) and is held here with it until measured (:meth:`take`)."""
        bred = breed(self.space(task_key, req.batch), scorer, req)
        picks = []
        for p in bred.picks:
            obj = p.schedule.to_json()
            self._held[(task_key, p.cid)] = p.schedule
            self._held_json[(task_key, p.cid)] = obj
            picks.append(replace(p, json=obj))
        while len(self._held) > HELD_PICKS:  # oldest first: picks measured elsewhere
            del self._held[next(iter(self._held))]
        while len(self._held_json) > HELD_JSON:  # (a BERT-base schedule's is ~35 KB as text)
            del self._held_json[next(iter(self._held_json))]
        return replace(bred, picks=tuple(picks))

    def take(self, task_key: str, cids: Sequence[str] | None,
             schedules: Sequence[dict[str, Any]],
             vectors: Sequence[tuple[int, np.ndarray] | None] | None = None
             ) -> list[GraphSchedule | None]:
        """The picks bred here among a batch, forgotten here; the others decoded again
        from their space vectors (``vectors[k]``: the space's batch and the pick's vector,
        or None) by this process's decoder; None for the rest (parsed from the JSON).

        A schedule stands for its JSON only if it writes exactly that JSON (the same
        schedule, so the same measurement): a held pick, if the JSON is the one it was
        bred with (compared as dicts: writing the schedule's JSON again cost ~0.18 ms a
        pick on gpt1); a decoded one, if its own JSON is equal. Decoding a vector with the compiled core
        costs less than parsing, validating and planning the JSON again (tiny_cnn b4,
        in one process: 0.70 against 0.95 ms of CPU per measurement, issue 20).
        """
        out: list[GraphSchedule | None] = [None] * len(schedules)
        if cids and self._held:
            for k, (cid, obj) in enumerate(zip(cids, schedules)):
                s = self._held.pop((task_key, cid), None)
                made = self._held_json.pop((task_key, cid), None)
                # the JSON it was sent as: the same dict in process, an equal copy remotely;
                # None: sent by its id alone, to the process that bred it (RayPool: slim)
                same = obj is None or ((made is obj or made == obj) if made is not None else (
                    s is not None and s.to_json() == obj))
                if s is not None and same:
                    out[k] = s
                    self.taken += 1
        for k, got in enumerate(vectors or ()):
            if got is None or k >= len(out) or out[k] is not None:
                continue
            try:
                s = self.space(task_key, got[0]).decode(got[1])
                same = s.to_json() == schedules[k]
            except Exception:  # noqa: BLE001 - a vector this space cannot read: the JSON
                continue
            if same:
                out[k] = s
                self.rebuilt += 1
        return out

    def warm(self, task_key: str, batch: int, measure: Callable[[Any], object] | None,
             samples: int = 8) -> None:
        """Build task ``task_key``'s space at ``batch`` and decode, pre-check and (with
        ``measure``: called with one decoded schedule that fits) measure a few random
        samples, so the process's first breeding and measurements find their memos and
        imports ready (what a worker does while the pool starts: the first call of a cold
        worker cost ~20 ms of CPU per measurement against ~2, issue 20)."""
        space = self.space(task_key, batch)
        rng = np.random.default_rng(0)
        fits = None
        for v in space.sample_vectors(rng, samples):
            s = space.decode(v)
            candidate_id(s)
            if space.precheck(s).ok and fits is None:
                fits = s
        if measure is not None and fits is not None:
            measure(fits)


# The moves a kicked climb proposes first (BreedRequest.climb): a kick leaves the moved
# boundary's groups with their old split factors (the first steps of the climbs that end
# in a better basin re-split them, measured on MobileNetV2 b16) and boundaries that the
# re-cut stage does not want (merged next).
CLIMB_FIRST = frozenset({"split", "boundary", "merge"})

# Picks a Breeder keeps for their measurement (see Breeder.take); more than the workers
# hold at once, so a pick is rarely forgotten before its batch comes.
HELD_PICKS = 1024
# ...of which the last this many with the JSON they were sent as (older ones write theirs
# again to compare): a held JSON costs memory (BERT-base s128: ~35 KB of text a schedule).
HELD_JSON = 256

# Decoded parents per space: the best measured schedules change slowly, so consecutive
# requests (and a worker's shares of them) mostly share their parents. Bounded.
_PARENTS: weakref.WeakKeyDictionary[Space, dict[bytes, GraphSchedule]] = (
    weakref.WeakKeyDictionary())
_MAX_PARENTS = 256


def _parent(space: Space, vector: np.ndarray) -> GraphSchedule:
    """``space.decode(vector)``, remembered (decoding is deterministic)."""
    memo = _PARENTS.get(space)
    if memo is None:
        memo = _PARENTS[space] = {}
    key = np.asarray(vector, dtype=np.int64).tobytes()
    s = memo.get(key)
    if s is None:
        if len(memo) >= _MAX_PARENTS:
            memo.clear()
        s = memo[key] = space.decode(vector)
    return s


# Feature rows per space, by candidate id, kept over rounds (a polish round ranks the same
# best's neighbours again, and parents come back round after round): 16 % of a BERT-base
# tune's rows were featurised by an earlier round. Only for a scorer whose rows are
# ``cost_model.features`` of the space's own graph and target (:func:`_rows_by_schedule`):
# a function of the schedule alone, so of its candidate id. Bounded: past _MAX_ROWS the
# older half is dropped.
_ROWS: weakref.WeakKeyDictionary[Space, dict[str, np.ndarray]] = weakref.WeakKeyDictionary()
_MAX_ROWS = 8192


def _rows_by_schedule(space: Space, scorer: Scorer) -> bool:
    """Whether ``scorer``'s feature rows are ``cost_model.features(space.graph, [s],
    space.target)`` of each schedule alone (the snapshot a pool sends, or the in-process
    ranker with the space's graph and target), so rows may be kept by candidate id."""
    from autotune.sampling._ranker import CostModelRanker, _CostModelScorer

    if type(scorer) is _CostModelScorer:
        return True
    inner = scorer._ranker if type(scorer) is RankerScorer else None
    return (type(inner) is CostModelRanker and inner._graph is space.graph
            and inner._target == space.target)


def _kept_rows(space: Space) -> dict[str, np.ndarray]:
    rows = _ROWS.get(space)
    if rows is None:
        rows = _ROWS[space] = {}
    elif len(rows) > _MAX_ROWS:
        for cid in list(islice(rows, len(rows) // 2)):
            del rows[cid]
    return rows


def _cdf(p: np.ndarray) -> np.ndarray:
    """What ``Generator.choice(len(p), p=p)`` draws by (its cumulative sum, made once)."""
    cdf = np.asarray(p, dtype=np.float64).cumsum()
    cdf /= cdf[-1]
    return cdf


def _draw(cdf: np.ndarray, rng: np.random.Generator) -> int:
    """``int(rng.choice(len(p), p=p))`` with ``cdf = _cdf(p)``: the same index and the same
    use of ``rng`` (one ``random()``), without checking and summing ``p`` again on every
    draw (7.6 against 0.9 µs a draw; a test holds it to ``choice``)."""
    return int(cdf.searchsorted(rng.random(), side="right"))


class _Round:
    def __init__(self, space: Space, scorer: Scorer, req: BreedRequest,
                 rng: np.random.Generator) -> None:
        self.space, self.scorer, self.req, self.rng = space, scorer, req, rng
        self.seen = set(req.seen)  # and req.seen_base, not copied (the bulk of them)
        self.base: frozenset[str] = req.seen_base
        self.rows: dict[str, np.ndarray] = {}  # features computed this round
        # features kept over rounds (None: this scorer's rows are not kept)
        self.kept = _kept_rows(space) if _rows_by_schedule(space, scorer) else None
        self.decoded = 0  # candidates decoded (sampled, mutated, crossed over)

    def admit(self, cid: str, s: GraphSchedule) -> bool:
        if cid in self.seen or cid in self.base or not self.space.precheck(s).ok:
            return False
        self.seen.add(cid)
        return True

    def features_of(self, items: Sequence[tuple[str, GraphSchedule]]) -> list[np.ndarray]:
        rows, kept = self.rows, self.kept
        todo = [(cid, s) for cid, s in items if cid not in rows]
        if todo and kept:
            rest = []
            for cid, s in todo:
                row = kept.get(cid)
                if row is None:
                    rest.append((cid, s))
                else:
                    rows[cid] = row
            todo = rest
        if todo:
            x = np.asarray(self.scorer.features(self.space, [s for _, s in todo]),
                           dtype=np.float32)
            if kept is not None:
                x.flags.writeable = False  # its rows are kept: shared, never written
            for (cid, _), row in zip(todo, x):
                rows[cid] = row
                if kept is not None:
                    kept[cid] = row
        return [rows[cid] for cid, _ in items]

    def predict(self, items: Sequence[tuple[str, GraphSchedule]]) -> np.ndarray:
        if not items:
            return np.zeros(0)
        return np.asarray(self.scorer.predict(np.stack(self.features_of(items))))

    def neighbours(self) -> list[tuple[float, str, GraphSchedule]]:
        """No model yet: one-move neighbours of the best measured, the best parent's first."""
        rng, sp = self.rng, self.space
        keyed: list[tuple[float, str, GraphSchedule]] = []
        per = max(2, 2 * self.req.proposals // len(self.req.parents))
        for rank, vec in enumerate(self.req.parents):
            parent = _parent(sp, vec)
            for _ in range(per):
                self.decoded += 1
                s = sp.mutate(parent, rng)
                keyed.append((rank + float(rng.random()), candidate_id(s), s))
        keyed.sort(key=lambda x: x[0])
        out: dict[str, tuple[float, str, GraphSchedule]] = {}
        for key, cid, s in keyed:
            if cid not in self.seen and cid not in self.base:
                out.setdefault(cid, (key, cid, s))
        return list(out.values())

    def polish(self) -> tuple[list[tuple[float, str, GraphSchedule]], int]:
        """The first ``req.polish`` one-move neighbours of the best not seen, best predicted
        first, and the size of its neighbourhood (see :mod:`autotune.sampling._polish`)."""
        from autotune.sampling._polish import polish_ranked

        vec = self.req.parents[0]
        inner = getattr(self.scorer, "_ranker", self.scorer)  # what computes the features
        p = polish_ranked(self.space, vec, _parent(self.space, vec), self.req.polish,
                          lambda cid: cid not in self.seen and cid not in self.base,
                          self.features_of, self.scorer.predict, type(inner).__name__,
                          bool(self.scorer.label), self.req.kick,
                          CLIMB_FIRST if self.req.climb else frozenset())
        self.decoded += p.decoded
        return p.ranked, p.size

    def evolve(self) -> list[tuple[float, str, GraphSchedule]]:
        """Model-guided evolution; the new candidates, best predicted first."""
        req, sp, rng = self.req, self.space, self.rng
        n_random = (max(1, int(req.population * req.random_share)) if req.parents
                    else req.population)
        self.decoded += n_random
        pop = [(candidate_id(s), s) for s in
               [_parent(sp, v) for v in req.parents] + [sp.sample(rng) for _ in range(n_random)]]
        pool: dict[str, GraphSchedule] = {}
        for cid, s in pop:
            pool.setdefault(cid, s)
        for _ in range(req.generations):
            scores = self.predict(pop)
            children = [(candidate_id(s), s) for s in self.children(pop, scores)]
            for cid, s in children:
                pool.setdefault(cid, s)
            keep = np.argsort(-scores, kind="stable")[: max(1, len(pop) // 4)]
            pop = [pop[int(k)] for k in keep] + children
        fresh = self.fresh(pool.items())
        if not fresh:
            return []
        scores = self.predict(fresh)
        return [(-float(scores[int(k)]), *fresh[int(k)]) for k in np.argsort(-scores, kind="stable")]

    def fresh(self, items: Iterable[tuple[str, GraphSchedule]]) -> list[tuple[str, GraphSchedule]]:
        out: dict[str, GraphSchedule] = {}
        for cid, s in items:
            if cid not in self.seen and cid not in self.base:
                out.setdefault(cid, s)
        return list(out.items())

    def children(self, pop: Sequence[tuple[str, GraphSchedule]], scores: np.ndarray
                 ) -> list[GraphSchedule]:
        """``population`` children: parents drawn by rank (better predicted, more children)."""
        rng, sp = self.rng, self.space
        ranks = np.empty(len(pop))
        ranks[np.argsort(-scores, kind="stable")] = np.arange(len(pop))
        weights = 1.0 / (ranks + 4.0)
        weights /= weights.sum()
        cdf = _cdf(weights)
        pick: Callable[[], GraphSchedule] = lambda: pop[_draw(cdf, rng)][1]  # noqa: E731
        out = []
        self.decoded += self.req.population
        for _ in range(self.req.population):
            if len(pop) > 1 and rng.random() < self.req.crossover:
                out.append(sp.crossover(pick(), pick(), rng))
            else:
                out.append(sp.mutate(pick(), rng))
        return out
