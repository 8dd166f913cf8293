"""Grafts: a window of another variant's schedule, carried into this variant's best.

What a sweep lacked (``bench/results/sweep.md``, eighteenth pass): on ResNet-50 b16 at
L1 512K / DDR 13 the cold tune of seed 0 reached 12,358 µs and the sweep stayed at
13,034 (q 0.948). The two schedules differ in ops 139-176 only (the first block of the
last stage: the cold one gives its main branch a group of 2 steps, so its weights stream
twice instead of four times); the other ops cost the same. The sweep's log held that
structure in schedules measured on other variants (L1 1M, mediocre there), but a warm
start carries a whole schedule (the donor's other groups are slow at 512K), the tune's
crossover takes each segment from either parent at random (a run of 10 segments from one
parent has odds 2^-10), and from the sweep's best it is 8 moves away through schedules
10-200 % slower, so neither the hill climb nor evolution gets there. A graft takes the
donor's parameters over a window of its groups (1 to :data:`SPAN` consecutive ones: the
boundaries on and inside the window, the groups' split, cores and scopes) and the base's
everywhere else: one such window of it in the sweep's best gives 12,120 µs. (That donor,
34th of 90 on its own variant, repaired to fit 512K, runs at 12,242 µs as a whole too: a
warm start carries the others' 1-3 fastest only.)

:func:`graft_seeds` takes the other variants' measured schedules (the :data:`DONORS`
fastest distinct of each) and every graft of them into the variant's best, drops those
that overflow or were measured, and ranks them by a cost model trained on the variant's
own measurements (the roofline estimate until it has enough): the good ones are among
its first few of ~3,000 (the sweep measures :data:`GRAFTS` per chunk as warm seeds).
Everything is read from the log, so a re-run makes the same choice from the same log.
A caller's memo (the sweep keeps one per variant and task) saves the decodes, checks,
projections and feature rows of earlier calls, never changing a pick.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from autotune.whatif._regroup import _view, by_class, pair_vectors, regroup_vectors

if TYPE_CHECKING:
    from compiler.graph import Graph
    from compiler.schedule import GraphSchedule
    from compiler.target import Target
    from logs import Record
    from search_space import Space

__all__ = ["DONORS", "GRAFTS", "SPAN", "graft_seeds", "graft_vectors"]

GRAFTS = 4
"""Grafts a variant's later chunk measures first (per task)."""

SPAN = 3
"""Most consecutive donor groups one graft carries."""

DONORS = 120
"""Distinct schedules per other variant that donate windows (their fastest first)."""


def graft_vectors(space: Space, base: np.ndarray, donor: np.ndarray, n_ops: int,
                  span: int = SPAN) -> list[tuple[tuple[int, int], np.ndarray]]:
    """``((a, b), vector)`` of ``space``: ``base`` with each window ``[a, b)`` of 1 to ``span``
    consecutive groups of ``donor`` taken from ``donor`` (distinct vectors, none equal to
    ``base``; none where ``base`` has no boundaries).

    A window ``[a, b)`` (two of the donor's group starts, or the end) takes the donor's
    boundaries at ``a``, inside and at ``b`` (in the base's granularity: a boundary is
    rank 0, none is the first rank that is not one) and the parameters of the groups that
    start inside it; the group that starts at ``b`` keeps the base's parameters where the
    base starts one there, else gets the donor's. Global parameters stay the base's.
    """
    below, base_starts = _view(space, base)
    if below == 0:
        return []
    d_below, d_starts = _view(space, donor)
    at = np.array([f.at for f in space.free])
    cut = np.array([f.kind == "cut" for f in space.free])
    own = set(base_starts)
    cuts = np.where(donor < d_below, 0, below).astype(base.dtype)  # donor's boundaries, base's ranks
    bounds = [*d_starts, n_ops]
    out: list[tuple[tuple[int, int], np.ndarray]] = []
    seen = {base.tobytes()}
    for i in range(len(bounds) - 1):
        for j in range(i + 1, min(i + span, len(bounds) - 1) + 1):
            a, b = bounds[i], bounds[j]
            take = ~cut & (at >= a) & ((at < b) | ((at == b) & (b not in own)))
            w = np.where(take, donor, base)
            w = np.where(cut & (at >= a - 1) & (at <= b - 1), cuts, w).astype(base.dtype)
            if w.tobytes() not in seen:
                seen.add(w.tobytes())
                out.append(((a, b), w))
    return out


def graft_seeds(space: Space, graph: Graph, target: Target, own: Sequence[Record],
                donors: Sequence[Record], count: int = GRAFTS, seed: int | None = None,
                memo: dict[str, dict[Any, Any]] | None = None, regroup: int = 0
                ) -> list[GraphSchedule]:
    """The ``count`` schedules the cost model ranks first among ``donors`` (each in ``space``:
    exactly, else its nearest projection) and their grafts (:func:`graft_vectors`) into the
    fastest of ``own``.

    Args:
        space: The variant's space of the task.
        graph: The task's graph.
        target: The variant.
        own: The variant's records of the task (the base is the fastest that ran).
        donors: Other variants' records of the task; the :data:`DONORS` fastest distinct
            schedules of each target donate.
        count: How many to return.
        seed: The cost model's seed.
        memo: What earlier calls for the same space worked out, kept by the caller (None:
            none): each record's vector, each graft's canonical vector (False: it overflows,
            or its candidate was measured or picked), each schedule's feature row. Only
            work is saved: a kept memo picks what a fresh one picks (h111: the grafts' CPU
            -20 to -33 % on the eighteenth pass's logs, decoding and featurising each graft
            once instead of at every call, and projecting a record once instead of twice).
        regroup: Also this many regroupings of the base (:mod:`autotune.whatif._regroup`:
            groups merged, a group cut, a boundary moved), after the grafts: none of them,
            ranked by the same model, one per move (:func:`~autotune.whatif._regroup.by_class`).
            0 (the default): the grafts alone, as before. Then
            :data:`autotune.whatif._regroup.PAIRS` pairs of regroupings
            (:func:`~autotune.whatif._regroup.pair_vectors`), the model's first (0, the default:
            none).

    Returns schedules that fit ``target`` and are none of ``own``, best-ranked first (the
    grafts, then the regroupings, then the pairs).
    """
    from autotune.sampling._ranker import CostModelRanker
    from compiler.capacity import check_capacity, in_compute_dtype
    from compiler.schedule import GraphSchedule

    memo = {} if memo is None else memo
    vecs, grafts = memo.setdefault("vector", {}), memo.setdefault("graft", {})
    rows = memo.setdefault("row", {})
    ran = [r for r in own if r.result.status.value == "ok" and r.result.latency_us]
    from autotune.whatif import _regroup

    if (count < 1 and regroup < 1 and _regroup.PAIRS < 1) or not ran:
        return []
    base = _vector(space, min(ran, key=lambda r: float(r.result.latency_us or 0.0)), vecs)
    if base is None:
        return []
    vectors: dict[bytes, np.ndarray] = {}
    by_target: dict[str, list[Record]] = {}
    for r in donors:
        if r.result.status.value == "ok" and r.result.latency_us:
            by_target.setdefault(str(r.target), []).append(r)
    for tk in sorted(by_target) if count >= 1 else ():
        distinct: set[bytes] = set()
        for r in sorted(by_target[tk], key=lambda r: float(r.result.latency_us or 0.0)):
            v = _vector(space, r, vecs)
            if v is None or v.tobytes() in distinct:
                continue
            distinct.add(v.tobytes())
            vectors.setdefault(v.tobytes(), v)  # the whole donor too
            for _, w in graft_vectors(space, base, v, len(graph.ops)):
                vectors.setdefault(w.tobytes(), w)
            if len(distinct) >= DONORS:
                break
    seen = {v.tobytes() for v in (_vector(space, r, vecs) for r in own) if v is not None}
    g = in_compute_dtype(graph, target)
    fresh: dict[bytes, GraphSchedule] = {}  # decoded in this call

    def fitting(cands: dict[bytes, np.ndarray]) -> list[bytes]:
        """The candidates that fit and are none of ``seen`` (then seen), in order."""
        picked: list[bytes] = []
        for key, w in cands.items():
            if key in seen or grafts.get(key) is False:
                continue
            if key not in grafts:  # its canonical vector if it fits (decoded and checked once)
                try:
                    s = space.decode(w)
                    grafts[key] = (space.encode(s).tobytes()
                                   if check_capacity(g, s, target) is None else False)
                    fresh[key] = s
                except Exception:  # noqa: BLE001 - a graft that does not decode or check: not a seed
                    grafts[key] = False
            canon = grafts[key]
            if canon is False or canon in seen:  # overflows, or measured or picked: never again
                grafts[key] = False
                continue
            seen.add(canon)
            picked.append(key)
        return picked

    def schedule(key: bytes) -> GraphSchedule:
        return fresh[key] if key in fresh else space.decode(vectors[key])

    ranker: list[CostModelRanker] = []

    def scored(picked: list[bytes]) -> np.ndarray:
        """The model's scores of ``picked`` (fitted once per call on the variant's rows)."""
        if not ranker:
            ranker.append(CostModelRanker(graph, target, seed))
            mine: list[Any] = [_own_key(r) for r in ran]
            todo = [(m, r) for m, r in zip(mine, ran, strict=True) if m not in rows]
            if todo:
                x = ranker[0].features([GraphSchedule.from_json(dict(r.schedule)) for _, r in todo])
                for (m, _), row in zip(todo, x, strict=True):
                    rows[m] = row
            ranker[0].fit(np.array([rows[k] for k in mine]),
                          np.array([float(r.result.throughput_per_s or 0.0) for r in ran]))
        new = [k for k in picked if k not in rows]  # features are per schedule: computed once
        for k, row in zip(new, ranker[0].features([schedule(k) for k in new]) if new else [],
                          strict=True):
            rows[k] = row
        return np.asarray(ranker[0].predict(np.array([rows[k] for k in picked])))

    picked = fitting(vectors)
    if len(picked) <= count:
        out = [schedule(k) for k in picked]
    else:
        scores = scored(picked)
        order = sorted(range(len(picked)), key=lambda k: (-float(scores[k]), k))
        out = [schedule(picked[k]) for k in order[:count]]
    if regroup < 1 and _regroup.PAIRS < 1:
        return out
    for s in out:  # the grafts picked: no regrouping repeats one
        seen.add(space.encode(s).tobytes())
    moves: dict[bytes, tuple[str, int, int]] = {}
    for mv, w in regroup_vectors(space, base, len(graph.ops)) if regroup >= 1 else ():
        if w.tobytes() not in vectors:
            vectors[w.tobytes()] = w
            moves[w.tobytes()] = mv
    keys = fitting({k: vectors[k] for k in moves})
    take = by_class([moves[k] for k in keys], scored(keys), regroup) if keys else []
    picks = [schedule(keys[k]) for k in take]
    picks += _pairs(space, base, len(graph.ops), vectors, moves, fitting, scored, schedule)
    # the regroupings' verdicts and feature rows are not kept: ~14,000-16,000 a best, kept
    # for every best of every variant they took a sweep's peak memory from ~2 GB to
    # 3.8-5.5 GB (the twentieth pass); only work is lost (a kept memo is a cache)
    for k in moves:
        grafts.pop(k, None)
        rows.pop(k, None)
    return out + picks


def _pairs(space: Space, base: np.ndarray, n_ops: int, vectors: dict[bytes, np.ndarray],
           moves: dict[bytes, tuple[str, int, int]], fitting: Any, scored: Any, schedule: Any
           ) -> list[GraphSchedule]:
    """The :data:`autotune.whatif._regroup.PAIRS` pairs of regroupings of ``base`` the model
    ranks first (:func:`~autotune.whatif._regroup.pair_vectors`), after the regroupings
    (``moves``: theirs and these are forgotten by the caller, as the regroupings are)."""
    from autotune.whatif import _regroup

    if _regroup.PAIRS < 1:  # (read here, so a test or a bench run may set it)
        return []
    pairs: dict[bytes, tuple[str, int, int]] = {}
    for mv, w in pair_vectors(space, base, n_ops):
        if w.tobytes() not in vectors:
            vectors[w.tobytes()] = w
            pairs[w.tobytes()] = mv
    keys = fitting({k: vectors[k] for k in pairs})
    moves.update(pairs)
    if not keys:
        return []
    scores = scored(keys)
    order = sorted(range(len(keys)), key=lambda k: (-float(scores[k]), k))
    return [schedule(keys[k]) for k in order[:_regroup.PAIRS]]


def _own_key(rec: Record) -> tuple[Any, ...]:
    """A measured record's key among the memo's feature rows (not a vector's bytes)."""
    return ("own", str(rec.target), rec.workload.key, rec.prov.trial, rec.prov.time_unix_s,
            rec.prov.tuner)


def _vector(space: Space, rec: Record, memo: dict[Any, Any]) -> np.ndarray | None:
    """The schedule of ``rec`` in ``space`` (exactly, else its nearest projection), None if
    neither; by the record's target, trial and time in ``memo``."""
    from compiler.schedule import GraphSchedule

    key = (str(rec.target), rec.prov.trial, rec.prov.time_unix_s, rec.prov.tuner)
    if key not in memo:
        memo[key] = None
        try:
            schedule = GraphSchedule.from_json(dict(rec.schedule))
            p = space.project_nearest(schedule)  # exact where it can be (as encode), else nearest
            memo[key] = None if p.schedule is None else p.vector
        except Exception:  # noqa: BLE001 - a record of another version, or no projection
            pass
    return memo[key]
