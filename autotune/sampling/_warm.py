"""Warm starts of a tune: what is known before its first measurement.

* :class:`WarmRanker`: the guided sampler's cost model (:class:`CostModelRanker`)
  trained, before the task measures anything, on measurements of the same
  workload on other targets (a sweep's finished variants) and/or continued from
  the shipped pre-trained model (:func:`cost_model.load_pretrained`). Features
  are normalised by the target (``cost_model.features``), so a row measured on
  one variant says something about another; each source target is its own
  query group, so only orders within a target are learnt, never the
  targets' absolute speeds.
* :func:`warm_schedules`: the best schedules of those other targets, to be
  projected into the task's space and measured first where they fit
  (:func:`autotune._tune.tune`'s ``warm_schedules``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from autotune.sampling._ranker import FIT_PARAMS, REFIT, CostModelRanker, _CostModelScorer

if TYPE_CHECKING:
    from compiler.graph import Graph
    from compiler.schedule import GraphSchedule
    from compiler.target import Target
    from logs import Record
    from search_space import Space

__all__ = ["PriorData", "WarmRanker", "prior_data", "rank_quality", "ranker_factory",
           "warm_schedules"]

log = logging.getLogger("autotune.tune")

MAX_PRIOR_ROWS_PER_TARGET = 400
"""Rows of one other target a warm cost model trains on (its fastest first)."""


@dataclass(frozen=True)
class PriorData:
    """Feature rows and throughputs of one workload measured on other targets.

    Attributes:
        x: Feature rows (``cost_model.features`` of each record's own target).
        y: Measured throughputs (> 0).
        groups: One id per source target.
    """

    x: np.ndarray
    y: np.ndarray
    groups: np.ndarray

    def __len__(self) -> int:
        return len(self.y)


def prior_data(graph: Graph, records: Iterable[tuple[Target, Record]],
               per_target: int = MAX_PRIOR_ROWS_PER_TARGET) -> PriorData | None:
    """Training rows from successful records of ``graph``'s workload on other targets.

    Args:
        graph: The task's graph.
        records: ``(the target it ran on, record)`` pairs (failures are skipped).
        per_target: At most this many rows per target, its fastest.
    """
    import cost_model
    from compiler.schedule import GraphSchedule

    by_target: dict[str, tuple[Target, list[Record]]] = {}
    for target, rec in records:
        if rec.result.status.value != "ok" or not rec.result.throughput_per_s:
            continue
        by_target.setdefault(target.key, (target, []))[1].append(rec)
    xs, ys, gs = [], [], []
    for g, (target, recs) in enumerate(sorted(by_target.values(), key=lambda tr: tr[0].key)):
        recs = sorted(recs, key=lambda r: -float(r.result.throughput_per_s or 0.0))[:per_target]
        schedules: list[GraphSchedule] = []
        speeds: list[float] = []
        for r in recs:
            try:
                schedules.append(GraphSchedule.from_json(dict(r.schedule)))
            except Exception:  # noqa: BLE001 - a record of another version: not usable here
                continue
            speeds.append(float(r.result.throughput_per_s or 0.0))
        if not schedules:
            continue
        xs.append(np.asarray(cost_model.features(graph, schedules, target), dtype=np.float64))
        ys.append(np.asarray(speeds))
        gs.append(np.full(len(speeds), g, dtype=np.int64))
    if not xs:
        return None
    return PriorData(np.vstack(xs), np.concatenate(ys), np.concatenate(gs))


class WarmRanker(CostModelRanker):
    """A :class:`CostModelRanker` that knows something before the task's first measurement.

    Until the task has ``own_enough`` measurements of its own, every training fits
    them together with ``prior`` (other targets' rows, each target its own query
    group) and, with ``base``, continues boosting from the pre-trained model's
    trees. Before any own measurement the model is trained on the prior alone (or
    is the base model), so the first proposals are ranked by it rather than by
    the roofline estimate. From ``own_enough`` on (the count at which a cold
    tune's trees replace the roofline), it trains on the task's own rows alone:
    the other chips' rows teach the orders of schedules made for another balance
    of capacities and rates, and once this chip's own measurements can be learnt
    from, they hold it near those schedules (measured on MobileNetV2 b16, L1 512K,
    DDR 27: warm from the 768K variant, stuck at 1,731.9 µs after 200 against a
    cold tune's 1,653.8 at 166).

    **The hedge.** While the transferred model ranks, it does so beside the roofline
    estimate a cold tune starts from: a candidate scores the better of its two
    ranks (:func:`hedged_scores`), so half of each round's proposals, and of the
    population bred towards them, are the ones a cold tune would pick. A warm start
    then cannot take a variant's search away from where a cold tune finds its best
    (the other chip's best schedules are measured first but do not own the
    population).

    **The rank check.** What was learnt elsewhere is worth keeping only if it orders
    this target's schedules at least as well as the roofline does. At every
    training while it ranks, from :attr:`check_at` own rows on, the transferred
    model's predictions on the own rows are compared with their measured speeds
    (Spearman's rank correlation), and so are the roofline's
    (:func:`cost_model.analytical_cycles`); if the transferred model's correlation
    is lower, it is dropped for the rest of the tune and the ranker is a cold
    tune's from then on (the roofline until its own trees are trained; label
    ``xgb-warm/dropped``). Measured on MobileNetV2 b16, L1 512K / DDR 27, warm
    from the 768K variant: the transferred model's proposals were at 2,072 µs after
    60 measurements where the roofline-ranked ones were at 1,931 µs
    (``bench/results/sweep.md``, 2026-11-26 third pass).

    Args:
        graph: The task's graph.
        target: The target being tuned.
        seed: XGBoost's seed.
        prior: Rows of other targets (None: none).
        base: A pre-trained ``XGBModel`` file (None: train from scratch).
    """

    name = "xgb-warm"
    own_enough = 32
    check_at = 8
    cold_round = False
    """Set by the guided sampler for the own line's rounds (its islands): while the
    transferred model ranks, they are ranked as a cold tune ranks them (the roofline,
    then trees on the task's own rows from the first training on), never by it."""

    def __init__(self, graph: Graph, target: Target, seed: int | None = None,
                 prior: PriorData | None = None, base: str | None = None) -> None:
        self._prior_rows = prior
        self._base = base
        self.dropped: tuple[float, float] | None = None
        self._own_model = False
        super().__init__(graph, target, seed)
        self._cold = CostModelRanker._new_model(self)  # a cold tune's trees (own rows only)
        if base is not None or prior is not None:
            self.fit(np.zeros((0, 0)), np.zeros(0))
            if self._model.trained:
                self.label = self._label(0)

    def _label(self, own: int) -> str:
        what = []
        if self._base is not None:
            what.append("pretrained")
        if self._prior_rows is not None:
            what.append(f"prior={len(self._prior_rows)}")
        return f"{self.name}/{'+'.join(what)}/n={own}"

    def _new_model(self) -> Any:
        base = getattr(self, "_base", None)
        if base is None:
            return super()._new_model()
        import cost_model

        return cost_model.XGBModel.load(base, seed=self._seed, params=dict(FIT_PARAMS),
                                        refit=REFIT)

    def fit(self, x: np.ndarray, y: np.ndarray) -> None:
        """Train a fresh model on the prior rows and all of ``x, y`` (on ``x, y`` alone from
        :attr:`own_enough` rows on), then swap it in."""
        own = len(y)
        if self.hedging and self.check_at <= own < self.own_enough:
            transferred, roofline = rank_quality(self._model, x, y)
            log.debug("rank check on %d own rows: transferred %.2f, roofline %.2f", own,
                      transferred, roofline)
            if transferred < roofline:
                self.dropped = (transferred, roofline)
                log.info("the transferred cost model ranks this target's first %d measurements "
                         "worse than the roofline (Spearman %.2f < %.2f): dropped", own,
                         transferred, roofline)
        if self.dropped is not None or own >= self.own_enough:
            self._own_model = True
            model = CostModelRanker._new_model(self)
            model.fit(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64))
            self._model = model
            what = "dropped" if self.dropped is not None else "own"
            self.label = f"{self.name}/{what}/n={own}" if model.trained else "analytical"
            return
        if own:
            cold = CostModelRanker._new_model(self)
            cold.fit(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64))
            self._cold = cold
        xs, ys, gs = [], [], []
        top = 0
        if self._prior_rows is not None:
            xs.append(self._prior_rows.x)
            ys.append(self._prior_rows.y)
            gs.append(self._prior_rows.groups)
            top = int(self._prior_rows.groups.max()) + 1
        if own:
            xs.append(np.asarray(x, dtype=np.float64))
            ys.append(np.asarray(y, dtype=np.float64))
            gs.append(np.full(own, top, dtype=np.int64))
        model = self._new_model()
        if xs:
            model.fit(np.vstack(xs), np.concatenate(ys), np.concatenate(gs))
        self._model = model
        if model.trained:
            self.label = self._label(own)

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Scores, higher = faster: while the transferred model ranks (fewer than
        :attr:`own_enough` own rows, not dropped), the union of its order and the
        roofline's (:func:`hedged_scores`); then the task's own model, as a cold tune's."""
        if self.hedging and self.cold_round:
            return np.asarray(self._cold_model().predict(x), dtype=np.float64)
        model = self._model if self._model.trained else self._prior
        scores = np.asarray(model.predict(x), dtype=np.float64)
        if not self.hedging:
            return scores
        return hedged_scores(scores, np.asarray(self._prior.predict(x), dtype=np.float64))

    @property
    def hedging(self) -> bool:
        """Whether the transferred model ranks, alongside the roofline (see the class doc)."""
        return bool(self._model.trained and self.dropped is None and not self._own_model)

    @property
    def borrows(self) -> bool:
        """Whether it learnt from other targets' measurements (a sweep's warm start): the
        guided sampler then keeps an own line of parents, ranked by :attr:`cold_round`.
        Not for the shipped model alone: tried on ResNet-34 b16 (held out), 3 seeds at
        L1 512K and 3 at 384K / DDR 13, the islands reached within 2 % of the best no
        sooner on any and ended worse on 3 of 6 (``bench/results/sweep.md``, fifth pass)."""
        return self._prior_rows is not None

    def _cold_model(self) -> Any:
        return self._cold if self._cold.trained else self._prior

    def snapshot(self) -> Any:
        """The scores as they are now, picklable (a breeding worker's copy)."""
        if not self.hedging:
            return super().snapshot()
        if self.cold_round:
            return _CostModelScorer(self._cold_model(), self.label + "/cold")
        return _HedgedScorer(self._model, self._prior, self.label)


def hedged_scores(learnt: np.ndarray, roofline: np.ndarray) -> np.ndarray:
    """Scores whose order is the union of two orders: each candidate scores its better rank.

    A candidate's rank fraction under each (1 for the best, towards 0 for the worst;
    ties in the order given) and the larger of the two: the top ``k`` of the result
    are the top ``k/2`` of each, so a population bred with these scores keeps the
    roofline's picks (a cold tune's first proposals) beside the transferred model's.
    """
    def frac(v: np.ndarray) -> np.ndarray:
        out = np.empty(len(v))
        out[np.argsort(-v, kind="stable")] = np.arange(len(v))
        return 1.0 - out / max(len(v), 1)

    if len(learnt) == 0:
        return np.zeros(0)
    a, b = frac(learnt), frac(roofline)
    # the learnt model's rank breaks ties (a tiny share below one rank step)
    return np.maximum(a, b) + a / (4.0 * len(a) * len(a))


class _HedgedScorer(_CostModelScorer):
    """:func:`hedged_scores` of a learnt model and the roofline, on a breeding worker."""

    def __init__(self, model: Any, roofline: Any, label: str) -> None:
        super().__init__(model, label)
        self._roofline = roofline

    def predict(self, x: np.ndarray) -> np.ndarray:
        return hedged_scores(np.asarray(self._model.predict(x), dtype=np.float64),
                             np.asarray(self._roofline.predict(x), dtype=np.float64))


def rank_quality(model: Any, x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Spearman rank correlation with the measured speeds ``y`` of ``model``'s predictions on
    ``x``, and of the roofline estimate's (:func:`cost_model.analytical_cycles`).

    A constant prediction correlates 0 (it orders nothing).
    """
    import cost_model

    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    mine = np.asarray(model.predict(x), dtype=np.float64)
    roof = -np.asarray(cost_model.analytical_cycles(x), dtype=np.float64)
    return _spearman(mine, y), _spearman(roof, y)


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import spearmanr

    if len(a) < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return 0.0
    r = float(spearmanr(a, b).statistic)
    return 0.0 if not np.isfinite(r) else r


def ranker_factory(priors: dict[str, PriorData | None], base: str | None
                   ) -> Callable[[Space, Graph, Target, int | None], Any]:
    """A ``tune(ranker=...)`` factory: a :class:`WarmRanker` with each workload's prior rows.

    Args:
        priors: Workload key -> rows of other targets (missing or None: none).
        base: The pre-trained model file, or None.
    """

    def make(space: Space, graph: Graph, target: Target, seed: int | None) -> Any:
        prior = priors.get(graph.workload_key)
        if prior is None and base is None:
            from autotune.sampling._ranker import default_ranker

            return default_ranker(space, graph, target, seed)
        return WarmRanker(graph, target, seed, prior=prior, base=base)

    return make


def warm_schedules(records: Iterable[Record], per_target: int = 3) -> list[GraphSchedule]:
    """The ``per_target`` fastest distinct schedules of each target among ``records``."""
    from autotune.sampling._studies import candidate_id
    from compiler.schedule import GraphSchedule

    by_target: dict[str, list[Record]] = {}
    for rec in records:
        if rec.result.status.value == "ok" and rec.result.latency_us:
            by_target.setdefault(str(rec.target), []).append(rec)
    out: list[GraphSchedule] = []
    seen: set[str] = set()
    for key in sorted(by_target):
        taken = 0
        for rec in sorted(by_target[key], key=lambda r: float(r.result.latency_us or 0.0)):
            if taken >= per_target:
                break
            try:
                s = GraphSchedule.from_json(dict(rec.schedule))
            except Exception:  # noqa: BLE001 - a record of another version: not usable here
                continue
            cid = candidate_id(s)
            if cid in seen:
                continue
            seen.add(cid)
            out.append(s)
            taken += 1
    return out


def describe(schedules: Sequence[GraphSchedule]) -> str:
    """``"3 schedules"``: for progress lines."""
    return f"{len(schedules)} schedule{'s' if len(schedules) != 1 else ''}"


def enqueue_warm(ts: Any, schedules: Sequence[GraphSchedule], target: Target,
                 levels: Sequence[GraphSchedule] = ()) -> int:
    """Enqueue the schedules that the task's space expresses, that fit ``target`` and that
    the roofline does not put behind the task's own levels.

    Each is projected into the task's space (:meth:`Space.project`); one that the
    space cannot express, that overflows the target's L1 or LLB
    (:func:`compiler.capacity.check_capacity`), that was measured already or that
    is one of ``levels`` (the O0-O3/plan seeds, measured under their own label) is
    skipped. With ``levels``, so is one whose roofline estimate on ``target``
    (:func:`cost_model.analytical_cycles`: the schedule's traffic and work over
    this target's rates, with the spills its capacities cause) is slower than the
    fastest level's that fits ``target``: its groups were cut for another chip's
    balance, and the levels are measured anyway. The guided sampler is told which candidates are
    borrowed (:meth:`GuidedSampler.borrow`: these, and those an earlier run of the
    tune measured), so it breeds every other round from the task's own line only; each
    enqueued seed's trial carries the borrowed line's attribute too, so a later run given
    other seeds (a sweep's next chunk) does not take this one for the own line's.
    Returns how many were enqueued.
    """
    from autotune.sampling._studies import candidate_id
    from compiler.capacity import check_capacity, in_compute_dtype

    graph = in_compute_dtype(ts.task.graph, target)
    skip: set[str] = set()
    for s in levels:
        skip.add(candidate_id(s))
        p = ts.space.project(s)
        if p.schedule is not None:
            skip.add(candidate_id(p.schedule))
    picked: list[tuple[GraphSchedule, dict[str, Any]]] = []
    borrowed: list[str] = []
    for s in schedules:
        proj = ts.space.project(s)
        if proj.schedule is None:
            continue
        cid = candidate_id(proj.schedule)
        if cid in ts.latency and cid not in skip:
            borrowed.append(cid)  # measured in an earlier run of this tune
        if cid in ts.latency or cid in skip or any(cid == candidate_id(q) for q, _ in picked):
            continue
        try:
            if check_capacity(graph, proj.schedule, target) is not None:
                continue
        except Exception:  # noqa: BLE001 - an invalid schedule for this target: not a seed
            continue
        picked.append((proj.schedule, dict(proj.params)))
    if picked and levels:
        picked = _not_behind(ts.task.graph, picked, levels, target)
    borrow = getattr(ts.study.sampler, "borrow", None)
    borrowed += [candidate_id(p) for p, _ in picked]
    if borrow is not None and borrowed:
        # measured already or now: the sampler keeps an own line of parents beside them
        borrow(borrowed)
    from autotune.sampling._guided import LINE_ATTR

    for _s, params in picked:
        # the mark outlives this run: a resumed tune (a sweep's later chunk) whose seeds are
        # other schedules still knows this one is borrowed (h98: unmarked, earlier chunks'
        # seeds joined the own line and the own line bred in the borrowed basin)
        ts.study.enqueue_trial(params, user_attrs={LINE_ATTR: "borrowed"}, skip_if_exists=True)
    if picked:
        log.info("task %s: %d schedule(s) of other targets enqueued", ts.task.name, len(picked))
    return len(picked)


def _not_behind(graph: Graph, picked: list[tuple[GraphSchedule, dict[str, Any]]],
                levels: Sequence[GraphSchedule], target: Target
                ) -> list[tuple[GraphSchedule, dict[str, Any]]]:
    """The picks whose roofline estimate on ``target`` is no slower than the fastest level's
    that fits ``target`` (all of them when none fits).

    A level that overflows the target's L1 or LLB is not run (its record is a capacity
    error), so it is no baseline; its estimate is no bound either (ResNet-50 b16 at L1
    384K: the guide's plan overflows, and its estimate, 1.8, is below every schedule's
    that fits, so every seed of the 384K / DDR 27 variant, 3.7 against O3's 17.6 and
    19,170 µs simulated against O3's 90,104, was dropped: ``bench/results/sweep.md``, h70).
    """
    import cost_model
    from compiler.capacity import check_capacity, in_compute_dtype

    g = in_compute_dtype(graph, target)

    def fits(s: GraphSchedule) -> bool:
        try:
            return check_capacity(g, s, target) is None
        except Exception:  # noqa: BLE001 - a level invalid on this target is not run either
            return False

    levels = [s for s in levels if fits(s)]
    if not levels:
        return picked
    rows = cost_model.features(graph, [s for s, _ in picked] + list(levels), target)
    est = cost_model.analytical_cycles(np.asarray(rows, dtype=np.float64))
    fastest_level = float(est[len(picked):].min())
    return [p for p, e in zip(picked, est[:len(picked)]) if float(e) <= fastest_level]


def stale_pretrained(path: Any) -> str | None:
    """Why the model file ``path`` may be stale (trained on another simulator), or None.

    Compares the simulator fingerprint recorded beside it (:func:`cost_model.pretrained_info`)
    with today's (:func:`autotune.sampling._simprint.simulator_fingerprint`). A stale model
    is still used: the rank check drops it if it orders this target's first
    measurements worse than the roofline (:class:`WarmRanker`).
    """
    import cost_model
    from autotune.sampling._simprint import simulator_fingerprint

    info = cost_model.pretrained_info(path)
    now = simulator_fingerprint()
    was = None if info is None else info.get("simulator")
    if was == now:
        return None
    what = ("an unrecorded simulator" if was is None else f"another simulator (fingerprint {was})")
    return (f"the shipped cost model was trained on {what}; this simulator's fingerprint is "
            f"{now}: it ranks only while it orders this target's measurements at least as "
            "well as the roofline (retrain it: tools/train_pretrained.py)")


def pretrained_factory(records: dict[str, list[Any]], notify: Callable[[str], None] | None
                       ) -> Callable[[Space, Graph, Target, int | None], Any] | None:
    """A ranker factory that starts the tasks without records from the shipped model.

    Returns None (the default ranker everywhere) when every task has records, or
    when no shipped model matches this graphtune's features; ``notify`` is told
    which it is.
    """
    import cost_model

    say = notify or (lambda _m: None)
    empty = {key for key, recs in records.items() if not recs}
    if not empty:
        return None
    path = cost_model.pretrained_path()
    if path is None:
        say(f"no shipped pre-trained cost model for feature set {cost_model.feature_set_id()}: "
            "the roofline estimate ranks until the first measurements")
        return None
    say(f"{len(empty)} of {len(records)} task(s) have no records on this target yet: the "
        f"shipped pre-trained cost model ({path.name}) ranks their first candidates, beside "
        "the roofline estimate")
    stale = stale_pretrained(path)
    if stale:
        say(stale)
    factory = ranker_factory({}, str(path))

    def make(space: Space, graph: Graph, target: Target, seed: int | None) -> Any:
        if graph.workload_key in empty:
            return factory(space, graph, target, seed)
        from autotune.sampling._ranker import default_ranker

        return default_ranker(space, graph, target, seed)

    return make
