"""Scope climbs: a chunk's new best climbed by its own scope moves, each one measured.

What the polish could not do (``bench/results/sweep.md``, twenty-fifth and twenty-sixth
passes): on ResNet-50 b16 seed 0, L1 384K / DDR 27, a pair of regroupings of the sweep's best
(:func:`autotune.whatif._regroup.pair_vectors`) is measured in a chunk (9,493.6 µs, a new
best), and three scope moves from it pass the bar (9,456.0, 9,449.7, 9,416.2; the bar
9,435.8), but the polish proposes the model's first 6 of each schedule's ~300 one-move
neighbours and the model ranks those scope moves 11th-202nd: the chunk never climbs from
the pair. The first of them sets the scope of the group the pair made (ops 152-157); the
other two are scope moves the model ranks 3rd and 10th of the pair's 50 scope moves.

:func:`scope_climb` climbs from a start by its scope moves (``neighbour_vectors``' ``scope``
move: one op's ``scope`` or one segment's ``xscope`` set to another choice), those of the ops
the start changed against the chunk's old best first (the region of a new regrouping), then
the rest in the model's order; it measures them :data:`BLOCK` at a time and moves to the
fastest of a block that beats the current schedule (by more than ``STALL_TOL``), then starts
again from there; a start whose :data:`PER_STEP` first moves find nothing faster is left.
After a later chunk that found a new best, the sweep (:mod:`autotune.whatif._sweep`:
:func:`climbed_chunk`) climbs the chunk's new bests, fastest first, for at most :data:`CLIMB`
measurements more (within the sweep's total: the allotment takes them from later chunks).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from autotune.sampling._polish import STALL_TOL

if TYPE_CHECKING:
    from autotune.job._tasks import Task
    from autotune.whatif._targets import Variant
    from logs import Record
    from search_space import Space

__all__ = ["BLOCK", "CLIMB", "PER_STEP", "climbed_chunk", "room", "scope_climb", "scope_moves"]

CLIMB = 0
"""Most measurements a sweep spends after a later chunk that found a new best, climbing the
chunk's new bests by scope moves (:func:`climbed_chunk`; 0: none)."""

BLOCK = 4
"""Scope moves measured at once (one ``tune`` of them): the climb moves after each block."""

PER_STEP = 8
"""Scope moves of one schedule measured before the climb leaves it as a local optimum."""


def scope_moves(space: Space, x: np.ndarray, old: np.ndarray | None,
                score: Callable[[list[np.ndarray]], np.ndarray],
                seen: set[str] | None = None) -> list[np.ndarray]:
    """The scope moves of ``x`` (a vector of ``space``), one per distinct candidate
    (``candidate_id``: ~40 % of them do what another, or ``x`` itself, does) and none of
    ``seen`` (candidate ids): those of the ops where ``x`` differs from ``old`` (its free
    parameters' ops, first to last; None: no such region) first, then the rest, each part
    in ``score``'s order (highest first; ties by the ring's order)."""
    from autotune.sampling._studies import candidate_id
    from search_space._neighbours import neighbour_vectors

    ids = {candidate_id(space.decode(x)), *(seen or ())}
    moves: list[np.ndarray] = []
    for m, w in neighbour_vectors(space, space.decode(x)):
        cid = candidate_id(space.decode(w)) if m == "scope" else None
        if cid is not None and cid not in ids:
            ids.add(cid)
            moves.append(w)
    if not moves:
        return []
    at = np.array([f.at for f in space.free])
    lo = hi = -1
    if old is not None and (x != old).any():
        changed = at[np.nonzero(x != old)[0]]
        lo, hi = int(changed.min()), int(changed.max())
    near = [lo <= int(at[int(np.nonzero(w != x)[0][0])]) <= hi for w in moves]
    s = np.asarray(score(moves), dtype=float)
    order = sorted(range(len(moves)), key=lambda k: (not near[k], -s[k], k))
    return [moves[k] for k in order]


def scope_climb(space: Space, starts: Sequence[tuple[np.ndarray, float]], old: np.ndarray | None,
                score: Callable[[list[np.ndarray]], np.ndarray],
                measure: Callable[[list[np.ndarray]], list[float]], budget: int,
                seen: set[str] | None = None, block: int = BLOCK, per_step: int = PER_STEP
                ) -> tuple[np.ndarray | None, float, int]:
    """Climb each of ``starts`` (``(vector, latency)``, in order) by its scope moves
    (:func:`scope_moves`: against ``old`` at a start's first step, in the model's order
    after it), measuring at most ``budget`` of them in all.

    ``measure`` takes vectors and returns their latencies (inf: failed), one measurement
    each; ``seen`` (candidate ids) are never measured (and get the ones measured here).
    Returns (the fastest vector reached, None if no start; its latency; measurements spent).
    """
    from autotune.sampling._studies import candidate_id

    seen = set() if seen is None else seen
    best: tuple[np.ndarray | None, float] = (None, float("inf"))
    spent = 0
    for x, y in starts:
        first = True
        while spent < budget:
            todo = scope_moves(space, x, old if first else None, score, seen)[:per_step]
            first, moved = False, False
            for i in range(0, len(todo), block):
                part = todo[i:i + block][:budget - spent]
                if not part:
                    break
                got = measure(part)
                spent += len(part)
                seen.update(candidate_id(space.decode(w)) for w in part)
                j = int(np.argmin(got))
                if got[j] < y * (1.0 - STALL_TOL):
                    x, y, moved = part[j], float(got[j]), True
                    break
            if not moved:
                break
        if y < best[1]:
            best = (x, y)
        if spent >= budget:
            break
    return best[0], best[1], spent


def climbed_chunk(run: Callable[..., None], variant: Variant, others: Sequence[Variant],
                  extra: Sequence[Any], log_path: str, tasks: Sequence[Task], total: int,
                  room: int, seed: int | None = None, budget: int | None = None) -> None:
    """A sweep's later chunk of ``variant`` (to ``total`` records), then a climb of its new
    bests. ``run(variant, trials, others, extra, None, seeds)`` is the sweep's tune of
    ``variant`` to ``trials`` records, warm from ``others`` (``seeds``: these schedules only,
    by task key; None: a chunk's tune), as before. Then, with a ``budget`` (:data:`CLIMB` when
    None) and one task, the records the chunk measured that were a new best when measured
    (against the best before it) are climbed, fastest first, by :func:`scope_climb`, measuring
    at most ``budget`` and ``room`` (what the sweep's total leaves after the chunks handed out:
    :func:`room`; the allotment counts a variant's records past its budget, so the climb is
    paid from the later chunks)."""

    def run_to(trials: int, seeds: dict[str, list[Any]] | None) -> None:
        run(variant, trials, others, extra, None, seeds)

    from compiler.errors import GraphtuneError
    from search_space import build_space

    budget = min(CLIMB if budget is None else budget, room)
    if budget < 1 or len(tasks) != 1:
        run_to(total, None)
        return
    task = tasks[0]
    before = _ok(log_path, task, variant)
    run_to(total, None)
    after = _ok(log_path, task, variant)
    best = min((lat for _, lat in before), default=float("inf"))
    starts = []
    for rec, lat in after[len(before):]:
        if lat < best * (1.0 - STALL_TOL):
            best = lat
            starts.append((rec, lat))
    if not starts:
        return
    try:
        space = build_space(task.graph, variant.target, task.batch)
    except GraphtuneError:
        return
    _climb(space, run_to, log_path, task, variant, before, after, starts, seed, budget)


def room(histories: Mapping[str, Sequence[Any]], budget: Mapping[str, int], trials_per_variant: int,
         reserve: int) -> int:
    """Measurements the sweep's total leaves (``trials_per_variant`` per variant of ``budget``,
    less ``reserve``) after each variant's ``budget`` or its records, whichever is more."""
    total = trials_per_variant * len(budget) - reserve
    return total - sum(max(b, len(histories.get(k, ()))) for k, b in budget.items())


def _climb(space: Space, run_to: Callable[..., None],
           log_path: str, task: Task, variant: Variant, before: list[tuple[Record, float]],
           after: list[tuple[Record, float]], starts: list[tuple[Record, float]],
           seed: int | None, budget: int) -> None:
    """:func:`scope_climb` from ``starts`` (fastest first), each block measured by ``run_to``."""
    from autotune.sampling._ranker import CostModelRanker
    from autotune.sampling._studies import candidate_id
    from autotune.whatif._graft import _vector
    from compiler.schedule import GraphSchedule

    vecs: dict[Any, Any] = {}
    old = _vector(space, min(before, key=lambda p: p[1])[0], vecs) if before else None
    begin = [(v, lat) for rec, lat in sorted(starts, key=lambda p: p[1])
             if (v := _vector(space, rec, vecs)) is not None]
    ranker = CostModelRanker(task.graph, variant.target, seed)
    ok = [r for r, _ in after]
    ranker.fit(ranker.features([GraphSchedule.from_json(dict(r.schedule)) for r in ok]),
               np.array([float(r.result.throughput_per_s or 0.0) for r in ok]))
    seen = {candidate_id(GraphSchedule.from_json(dict(r.schedule))) for r in _all(log_path, task, variant)}

    def score(ws: list[np.ndarray]) -> np.ndarray:
        return np.asarray(ranker.predict(ranker.features([space.decode(w) for w in ws])))

    def measure(ws: list[np.ndarray]) -> list[float]:
        ids = [candidate_id(space.decode(w)) for w in ws]
        n = len(_all(log_path, task, variant))
        run_to(n + len(ws), {task.key: [space.decode(w) for w in ws]})
        got = {candidate_id(GraphSchedule.from_json(dict(r.schedule))): lat
               for r, lat in _ok(log_path, task, variant)}
        return [got.get(i, float("inf")) for i in ids]

    scope_climb(space, begin, old, score, measure, budget, seen)


def _all(log_path: str, task: Task, variant: Variant) -> list[Record]:
    from autotune.whatif._log import records

    return records(log_path, [task], [variant]).get(variant.key, {}).get(task.key, [])


def _ok(log_path: str, task: Task, variant: Variant) -> list[tuple[Record, float]]:
    """(record, latency) of the variant's records of ``task`` that ran, in log order."""
    return [(r, float(r.result.latency_us)) for r in _all(log_path, task, variant)
            if r.result.status.value == "ok" and r.result.latency_us]
