"""``sweep``: tune models on many variants of a chip and tabulate what each design costs.

For each variant (:mod:`autotune.whatif._targets`), the base target's nearest first
(:func:`autotune.whatif._nearest.tuning_order`; the table keeps the order given):

1. a capacity check (:func:`infeasible_reason`): a variant on which none of
   O0-O3, the guide's plans and a few hundred schedules sampled from the space
   fits the L1 and LLB is *infeasible* and gets no measurement;
2. a :func:`autotune._tune.tune` into the one log, with the variant as target (a warm
   variant's probe first spends a quarter of its measurements as a cold tune: :mod:`._cold`):
   the fastest schedules of the nearest variants finished before it and of the
   nearest that differs from it in rates only (projected into its space, and where
   they overflow it, repaired to fit: :mod:`autotune.whatif._repair`), then O0-O3
   and the guide's plans that fit, then the guided search, ranked by a cost model
   trained on those variants' measurements (:class:`autotune.sampling._warm.WarmRanker`),
   continued from the shipped pre-trained model (the first variant: that model alone). A
   seed the roofline puts behind the levels is not measured first, and nearer variants
   give the cost model more rows (:mod:`autotune.whatif._nearest`);
3. if no schedule ran, the variant is infeasible with the first capacity error it gave.

With ``allocate="adaptive"`` (the default) step 2 is a probe of a quarter of
``trials_per_variant`` per variant, and the rest of the sweep's budget
(``trials_per_variant`` times the feasible variants) then goes in chunks to the
variants whose best still improves (:mod:`autotune.whatif._budget`), each chunk a
resumed ``tune`` of that variant, warm from all the others (the nearest ones' best
schedules and every other variant's best). The chunks leave up to 7 measurements per
variant (:func:`autotune.whatif._budget.cross_reserve`) for a final cross-round
(:func:`_cross_round`): each variant, in the tuning order, measures the other variants'
final bests that it has not measured yet (those of the variants it dominates first:
it can run their schedules as they are), so a schedule one variant found late reaches
every variant it suits; what it leaves goes in chunks, then a second round (1 per pair).

The log is the truth, as for ``tune``: a variant whose records reach the
budget is not tuned again, and one cut short resumes, so a killed sweep
re-run measures nothing twice. The table (:func:`sweep_table`) is computed
from the log, so an interrupted and a full run give the same table.

Example:
    >>> vs = make_variants(Target.default(), [parse_set("l1.data_bytes=512K,1M")])
    >>> res = sweep(["mbv2.onnx"], vs, trials_per_variant=200, log="sweep.jsonl", out="sweep/")
    >>> res.rows[0].speedup_over_o3
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotune.job._tasks import Task, model_names
from autotune.whatif._budget import CROSS_MOST, allot, chunk_guided, cross_reserve, probe_size, screened
from autotune.whatif._climb import climbed_chunk, room
from autotune.whatif._cold import cold_share, cold_start
from autotune.whatif._feasible import infeasible, infeasible_reason
from autotune.whatif._graft import GRAFTS, graft_seeds
from autotune.whatif._log import records as _records
from autotune.whatif._log import sim_records as _sim_records
from autotune.whatif._nearest import cross_sources, lenders, tuning_order
from autotune.whatif._regroup import KICK, REGROUPS
from autotune.whatif._rows import SweepResult, SweepRow
from autotune.whatif._targets import Variant

if TYPE_CHECKING:
    from autotune.job._state import JobState
    from compiler.target import Target
    from logs import Record

__all__ = ["SweepResult", "SweepRow", "infeasible_reason", "sweep", "sweep_table"]

log = logging.getLogger("autotune.whatif")


# ---- the sweep -----------------------------------------------------------------------------------
def sweep(
    models: Iterable[Any],
    variants: Sequence[Variant],
    *,
    trials_per_variant: int,
    log: str | os.PathLike[str],
    out: str | os.PathLike[str] | None = None,
    workers: int | None = None,
    seed: int | None = None,
    time_budget_s: float | None = None,
    batch: int | None = None,
    warm: bool = True,
    pretrained: bool = True,
    callbacks: Sequence[Callable[[JobState], None]] = (),
    notify: Callable[[str], None] | None = None,
    on_variant: Callable[[int, Variant, str], None] | None = None,
    allocate: str = "adaptive",
    screen: bool = False,
    graft: int = GRAFTS,
    regroup: int = REGROUPS,
    kick: int = KICK,
    lend: bool = True,
    restart: int = 0,
) -> SweepResult:
    """Tune ``models`` on every variant into ``log``; write the table and plots to ``out``.

    Args:
        models: ONNX paths, ``Model``/``Graph`` values or ``Task`` values.
        variants: The targets (:func:`autotune.whatif._targets.make_variants`).
        trials_per_variant: Records per variant the log should hold (seeds included): each
            variant's with ``allocate="equal"``; on average with ``"adaptive"``, where each
            variant gets a probe and the rest goes where the best still improves
            (:mod:`autotune.whatif._budget`; a share left when no variant improves any
            more is not spent).
        log: The one JSON-lines log of every variant (appended; re-run to resume).
        out: Directory for ``table.csv``, ``table.json``, the plots and each variant's
            hardware file (``targets/<variant>.toml``); None writes nothing.
        workers: Measurer processes (0: in this process, deterministic with ``seed``).
        seed: Seed of every tune.
        time_budget_s: Wall time of the whole sweep; each variant gets an equal share
            of what is left, and stops after its batch in flight when it is spent.
        batch: Batch of models given as paths.
        warm: Seed each variant from the finished ones (schedules and cost model).
        pretrained: Start from the shipped cost model where nothing is known yet.
        callbacks: Passed to every tune.
        notify: Called with lines for the user.
        on_variant: Called with (position in the tuning order, variant, what happens) as each
            variant starts (variants are tuned nearest the base first: :func:`tuning_order`);
            ``"more"`` when an adaptive sweep gives a variant another chunk.
        allocate: ``"adaptive"`` (the default) or ``"equal"``.
        screen: Every tune but a probe's cold share breeds more per measurement
            (:func:`autotune.whatif._budget.screened`; off: as ``tune``, measured no better).
        graft: Grafts a variant's later chunk measures first, per task: windows of the other
            variants' schedules carried into its best (:mod:`autotune.whatif._graft`; 0: none).
        regroup: Regroupings of its best (groups merged, a group cut, a boundary moved) a
            later chunk measures after the grafts, per task (:mod:`autotune.whatif._regroup`).
        kick: A later chunk of a variant whose previous chunk left its best as it was (gained
            < ``_budget.STALL_TOL`` of it) kicks its polish this far (``polish_kick``; 0: none).
        lend: A variant picked for a chunk after one that left its best as it was lends it to
            a variant it dominates whose best is as fast (:func:`autotune.whatif._budget.lend_to`:
            one basin, and the smaller's finds fit the larger); False: each keeps its chunks.
        restart: After a chunk that gained < 0.01 %, breed from candidates this many parameters
            from the best, unpolished (:func:`autotune.whatif._budget.later_options`; 0: never).

    Raises:
        GraphtuneError: a bad argument, model or log (before anything is measured).
    """
    from autotune._options import RunOptions, SearchOptions
    from autotune._tune import check_log_path, load_tasks, tune
    from compiler.errors import GraphtuneError

    if trials_per_variant < 1:
        raise GraphtuneError(f"trials per variant must be >= 1, got {trials_per_variant}")
    if allocate not in ("adaptive", "equal"):
        raise GraphtuneError(f"unknown allocation {allocate!r}: choose adaptive or equal")
    if time_budget_s is not None and not time_budget_s > 0:
        raise GraphtuneError(f"the time budget must be > 0 s, got {time_budget_s}")
    if not variants:
        raise GraphtuneError("no variants to sweep")
    log_path = check_log_path(log)
    say = notify or (lambda _m: None)
    tasks = load_tasks(models, batch)
    result = SweepResult([], sorted({k for v in variants for k in v.values}))
    t0 = time.monotonic()
    reasons: dict[str, str] = {}
    order = tuning_order(variants)
    first = probe_size(trials_per_variant) if allocate == "adaptive" else trials_per_variant
    memos: dict[str, dict[str, Any]] = {}  # variant key -> what the grafts worked out (_graft)

    def run(variant: Variant, trials: int, finished: Sequence[Variant],
            extra: Sequence[Callable[[JobState], None]], loud: bool | None,
            seeds: dict[str, list[Any]] | None = None) -> None:
        """Tune ``variant`` to ``trials`` records, warm from ``finished``. A later chunk (``loud`` None)
        takes only their seeds: its own rows rank by then (WarmRanker.own_enough). ``seeds``: these
        instead, all measured (the cross-round: the levels were measured, so no baseline drops one)."""
        warm_seeds, ranker = seeds, None
        if warm and finished and seeds is None:
            if loud is not None:  # the probe: its cold share first (:mod:`._cold`)
                result.measured += cold_start(tasks, variant, cold_share(trials), log_path, seed,
                                              workers, [*callbacks, *extra])
            warm_seeds, ranker = _warm_from(log_path, tasks, variant, finished, pretrained,
                                            rows=loud is not None,
                                            graft=(graft, seed, memos, regroup))
        late = None if loud is not None else chunk_guided(trials_per_variant)  # polish sooner
        if late is not None and (kick or restart):  # kicked, or a restart elsewhere, if stalled
            from autotune.whatif._budget import later_options  # (the module at 600 lines)
            late = later_options(late, _histories(log_path, tasks, [variant]).get(variant.key, []),
                         trials_per_variant, kick, restart)
        late = screened(late) if screen else late  # more evolution per measurement
        res = tune(tasks, trials=trials, log=log_path, target=variant.target,
                   search=SearchOptions(seed=seed, ranker=ranker, warm_schedules=warm_seeds,
                                        pretrained=pretrained and ranker is None,
                                        seeds=seeds is None, guided=late),
                   run=RunOptions(workers=workers, callbacks=[*callbacks, *extra],
                                  notify=say if loud else None, curve=False))
        result.measured += res.measured
        if any(t.best_latency_us is None for t in res.tasks):
            reasons[variant.name] = _failure_reason(log_path, tasks, variant)
            say(f"{variant.name} is infeasible: {reasons[variant.name]}")

    for n, i in enumerate(order):
        variant = variants[i]
        why = infeasible(tasks, variant.target)
        if why is not None:
            reasons[variant.name] = why
            say(f"{variant.name} is infeasible: {why}")
            if on_variant:
                on_variant(n, variant, "infeasible")
            continue
        done = _records(log_path, tasks, [variant])
        have = sum(len(v) for v in done.get(variant.key, {}).values())
        if have >= first:
            if on_variant:
                on_variant(n, variant, "done")
            continue
        budget_cb: list[Callable[[JobState], None]] = []
        if time_budget_s is not None:
            left = time_budget_s - (time.monotonic() - t0)
            if left <= 0:
                say(f"the time budget is spent: {len(variants) - n} variant(s) not tuned "
                    "(re-run to continue)")
                break
            budget_cb.append(_deadline(time.monotonic() + left / (len(variants) - n)))
        finished = [variants[j] for j in order[:n] if variants[j].name not in reasons]
        if on_variant:
            on_variant(n, variant, "tuning")
        run(variant, first, finished, budget_cb, n == 0)
    else:
        if allocate == "adaptive":
            t_end = None if time_budget_s is None else t0 + time_budget_s
            ordered = [variants[i] for i in order]
            live = [v for v in ordered if v.name not in reasons]
            reserve = cross_reserve(len(live)) if warm else 0
            below = lenders(live) if lend else None
            _spend_the_rest(log_path, tasks, ordered, reasons, trials_per_variant, run,
                            on_variant, t_end, reserve, below)
            for again in ((len(live) - 1, 0) if reserve else ()):
                # then chunks leaving 1 per other variant: the last chunk's best reaches them (h88)
                _cross_round(log_path, tasks, ordered, reasons, trials_per_variant, run,
                             on_variant, t_end)
                if again:
                    _spend_the_rest(log_path, tasks, ordered, reasons, trials_per_variant, run,
                                    on_variant, t_end, again, below)
    result.rows = sweep_table(log_path, tasks, variants, reasons, trials_per_variant)
    if out is not None:
        from autotune.whatif._out import write_outputs

        result.files = write_outputs(Path(out), result, variants)
    return result


def _spend_the_rest(log_path: str, tasks: Sequence[Task], ordered: Sequence[Variant],
                    reasons: dict[str, str], trials_per_variant: int,
                    run: Callable[..., None],
                    on_variant: Callable[[int, Variant, str], None] | None,
                    t_end: float | None, reserve: int = 0,
                    below: dict[str, list[str]] | None = None) -> None:
    """Chunks to the variants whose best still improves (:func:`allot`), leaving ``reserve``;
    ``below``: who may lend a chunk to whom (:func:`lenders`; None: nobody)."""
    exhausted: set[str] = set()
    while True:
        live = [v for v in ordered if v.name not in reasons and v.key not in exhausted]
        if not live:
            return
        hist = _histories(log_path, tasks, live)
        budget, handed = allot(hist, [v.key for v in live], trials_per_variant,
                               {v.key: _floor(tasks, v) for v in live}, reserve, below)
        if not handed or len(hist.get(handed[-1], [])) >= budget[handed[-1]]:
            return
        if t_end is not None and time.monotonic() >= t_end:
            return
        variant = next(v for v in live if v.key == handed[-1])
        have = len(hist.get(variant.key, []))
        if on_variant:
            on_variant(ordered.index(variant), variant, "more")
        others = [v for v in ordered if v.name not in reasons and v.key != variant.key]
        climbed_chunk(run, variant, others, [] if t_end is None else [_deadline(t_end)], log_path, tasks,
                      budget[variant.key], room(hist, budget, trials_per_variant, reserve))  # (_climb)
        if len(_histories(log_path, tasks, [variant]).get(variant.key, [])) <= have:
            exhausted.add(variant.key)  # nothing new to measure (or the time is spent)


def _cross_round(log_path: str, tasks: Sequence[Task], ordered: Sequence[Variant],
                 reasons: dict[str, str], trials_per_variant: int,
                 run: Callable[..., None],
                 on_variant: Callable[[int, Variant, str], None] | None,
                 t_end: float | None) -> None:
    """The sweep's last measurements: each variant, in the tuning order, measures the other
    variants' bests (:func:`_cross_seeds`) that it has not measured yet, at most
    :data:`CROSS_MOST` and never past the sweep's total (``trials_per_variant`` times the
    feasible variants: a re-run of a finished sweep measures nothing). A variant later in
    the order sees the new bests of those before it."""
    live = [v for v in ordered if v.name not in reasons]
    total = trials_per_variant * len(live)
    for variant in live:
        if t_end is not None and time.monotonic() >= t_end:
            return
        hist = _histories(log_path, tasks, live)
        left = total - sum(len(h) for h in hist.values())
        if left <= 0:
            return
        others = [v for v in live if v.key != variant.key]
        seeds = _cross_seeds(log_path, tasks, variant, others)
        new = _unmeasured(log_path, tasks, variant, seeds)
        if not new:
            continue
        if on_variant:
            on_variant(ordered.index(variant), variant, "cross")
        run(variant, len(hist.get(variant.key, [])) + min(new, CROSS_MOST, left), others,
            [] if t_end is None else [_deadline(t_end)], None, seeds)


def _cross_seeds(log_path: str, tasks: Sequence[Task], variant: Variant,
                 others: Sequence[Variant]) -> dict[str, list[Any]]:
    """Task key -> the best schedule of each of ``others`` made to fit ``variant``
    (:func:`_fitted`), those it dominates first (:func:`autotune.whatif._nearest.cross_sources`
    after :func:`~autotune.whatif._nearest.seed_sources`, reordered)."""
    from autotune.sampling._warm import warm_schedules
    from autotune.whatif._nearest import dominates, seed_sources

    recs = _records(log_path, tasks, others)
    order = [*seed_sources(variant, others), *cross_sources(variant, others)]
    order.sort(key=lambda f: not dominates(variant, f))
    out: dict[str, list[Any]] = {}
    for t in tasks:
        best = [s for f in order
                for s in warm_schedules(recs.get(f.key, {}).get(t.key, []), per_target=1)]
        out[t.key] = _fitted(t, variant, best)
    return out


def _unmeasured(log_path: str, tasks: Sequence[Task], variant: Variant,
                seeds: dict[str, list[Any]]) -> int:
    """How many of ``seeds`` (task key -> schedules of ``variant``'s space) ``variant`` has not
    measured (distinct candidates)."""
    from autotune.sampling._studies import candidate_id
    from compiler.schedule import GraphSchedule

    recs = _records(log_path, tasks, [variant]).get(variant.key, {})
    n = 0
    for key, schedules in seeds.items():
        seen = set()
        for r in recs.get(key, []):
            try:
                seen.add(candidate_id(GraphSchedule.from_json(dict(r.schedule))))
            except Exception:  # noqa: BLE001 - a record of another version: not this candidate
                continue
        n += len({candidate_id(s) for s in schedules} - seen)
    return n


def _floor(tasks: Sequence[Task], variant: Variant) -> float:
    """The weighted lower bound of the tasks on the variant (:func:`sim.lower_bound`)."""
    from sim import lower_bound

    return sum(float(t.weight) * lower_bound(t.graph, t.batch, variant.target) for t in tasks)


def _histories(log_path: str, tasks: Sequence[Task], variants: Sequence[Variant]
               ) -> dict[str, list[float | None]]:
    """Variant key -> the tasks' weighted best latency after each record, in log order (None first)."""
    weight = {t.key: float(t.weight) for t in tasks}
    best: dict[str, dict[str, float]] = {}
    out: dict[str, list[float | None]] = {}
    for rec in _sim_records(log_path, tasks, variants):
        tk = str(rec.target)
        mine = best.setdefault(tk, {})
        lat = rec.result.latency_us
        if rec.result.status.value == "ok" and lat:
            mine[rec.workload.key] = min(mine.get(rec.workload.key, float("inf")), float(lat))
        out.setdefault(tk, []).append(
            sum(weight[k] * mine[k] for k in weight) if len(mine) == len(weight) else None)
    return out


def _deadline(t_end: float) -> Callable[[JobState], None]:
    def check(job: JobState) -> None:
        if time.monotonic() >= t_end:
            for ts in job.tasks:
                if not ts.stopped:
                    ts.stopped = "the sweep's time budget"

    return check


def _warm_from(log_path: str, tasks: Sequence[Task], variant: Variant,
               finished: Sequence[Variant], pretrained: bool, rows: bool = True,
               graft: tuple[int, int | None, dict[str, Any], int] = (0, None, {}, 0)
               ) -> tuple[dict[str, list[Any]], Any]:
    """Warm seeds and the ranker factory of ``variant`` from the finished variants' records.

    Seeds come from the nearest finished variants only (and the nearest of those that
    differ from ``variant`` in rates only: :func:`autotune.whatif._nearest.seed_sources`),
    and each finished variant gives the cost model fewer rows the farther it is
    (:mod:`autotune.whatif._nearest`). A seed made for a larger memory is repaired to fit
    ``variant`` (:func:`_fitted`). Without ``rows`` (a later chunk), the seeds alone (the
    ranker is None: the default one), and the best of every other finished variant too
    (:func:`autotune.whatif._nearest.cross_sources`): a sibling's best found after this
    variant's probe is measured at its next chunk; then ``graft`` = (count, seed, memos) of
    :func:`graft_seeds` (the finished variants' schedules grafted into ``variant``'s best) and
    the count of its regroupings.
    """
    from autotune.sampling._warm import MAX_PRIOR_ROWS_PER_TARGET, prior_data, ranker_factory, warm_schedules
    from autotune.whatif._nearest import prior_rows, seed_sources

    recs = _records(log_path, tasks, finished)
    targets = {v.key: v.target for v in finished}
    near = {v.key for v in seed_sources(variant, finished)}

    def seeds_of(t: Task) -> list[Any]:
        return _fitted(t, variant, warm_schedules(r for tk, by in recs.items() if tk in near
                                                  for r in by.get(t.key, [])))

    if not rows:
        # a later chunk: also every other finished variant's best (cross_sources)
        late = [v.key for v in cross_sources(variant, finished)]
        own = _records(log_path, tasks, [variant]).get(variant.key, {})

        def late_seeds(t: Task) -> list[Any]:
            mine = warm_schedules(r for tk, by in recs.items() if tk in near
                                  for r in by.get(t.key, []))
            best = [s for k in late
                    for s in warm_schedules(recs.get(k, {}).get(t.key, []), per_target=1)]
            return _fitted(t, variant, mine + best) + _grafts(t, variant, own, recs, graft)

        return {t.key: late_seeds(t) for t in tasks}, None
    rows_of = prior_rows(variant, finished, MAX_PRIOR_ROWS_PER_TARGET)
    seeds: dict[str, list[Any]] = {}
    priors: dict[str, Any] = {}
    for t in tasks:
        seeds[t.key] = seeds_of(t)
        mine = [(targets[tk], r) for tk, by in recs.items() if tk in rows_of
                for r in _fastest(by.get(t.key, []), rows_of[tk])]
        priors[t.key] = prior_data(t.graph, mine)
    base = None
    if pretrained:
        import cost_model

        p = cost_model.pretrained_path()
        base = str(p) if p is not None else None
    return seeds, ranker_factory(priors, base)


def _grafts(task: Task, variant: Variant, own: dict[str, list[Record]],
            recs: dict[str, dict[str, list[Record]]],
            graft: tuple[int, int | None, dict[str, Any], int]
            ) -> list[Any]:
    """:func:`graft_seeds` of the other variants' records of ``task`` (``recs``) into ``variant``
    (its records by task: ``own``)."""
    from compiler.errors import GraphtuneError
    from search_space import build_space

    count, seed, memos, regroup = graft
    donors = [r for tk, by in sorted(recs.items()) if tk != variant.key for r in by.get(task.key, [])]
    if count < 1 or not own.get(task.key) or not donors:
        count = 0
    if (count < 1 and regroup < 1) or not own.get(task.key):
        return []
    try:
        space = build_space(task.graph, variant.target, task.batch)
    except GraphtuneError:
        return []
    return graft_seeds(space, task.graph, variant.target, own[task.key], donors, count, seed,
                       memos.setdefault(f"{variant.key} {task.key}", {}), regroup)


def _fitted(task: Task, variant: Variant, schedules: Sequence[Any]) -> list[Any]:
    """The seeds made to fit ``variant`` (:func:`autotune.whatif._repair.fit_schedule`): a
    schedule of a larger L1 with its scopes and, where still needed, its shapes repaired;
    one that fits as it is, unchanged; one that cannot be made to fit, dropped. Each is
    returned projected into the variant's space, as the tune enqueues it."""
    from autotune.whatif._repair import fit_schedule
    from compiler.errors import GraphtuneError
    from search_space import build_space

    if not schedules:
        return []
    try:
        space = build_space(task.graph, variant.target, task.batch)
    except GraphtuneError:
        return list(schedules)  # no space: the tune says why
    out: list[Any] = []
    for s in schedules:
        fitted = fit_schedule(space, task.graph, s, variant.target)
        # as the tune enqueues it (enqueue_warm projects): what _unmeasured counts (review)
        proj = None if fitted is None else space.project(fitted).schedule
        if proj is not None:
            out.append(proj)
    return out


def _fastest(recs: Sequence[Record], n: int) -> list[Record]:
    ok = [r for r in recs if r.result.status.value == "ok" and r.result.throughput_per_s]
    return sorted(ok, key=lambda r: -float(r.result.throughput_per_s or 0.0))[:n]


def _failure_reason(log_path: str, tasks: Sequence[Task], variant: Variant) -> str:
    recs = _records(log_path, tasks, [variant]).get(variant.key, {})
    errors = [r.result for by in recs.values() for r in by if r.result.status.value != "ok"]
    for r in (r for r in errors if r.status.value == "capacity"):
        return f"capacity: every schedule measured overflows ({r.error})"
    if errors:
        return f"no schedule ran: {errors[0].status.value}: {errors[0].error}"
    return "no schedule was measured"


# ---- the table -----------------------------------------------------------------------------------
def sweep_table(log_path: str, tasks: Sequence[Task], variants: Sequence[Variant],
                reasons: dict[str, str], trials_per_variant: int) -> list[SweepRow]:
    """The table of a sweep, from its log: one row per model and variant."""
    from autotune.report._report import is_seed_label  # noqa: F401 - keeps the labels' meaning in one place

    recs = _records(log_path, tasks, variants)
    rows: list[SweepRow] = []
    for model in model_names(tasks):
        mine = [t for t in tasks if t.count_in(model)]
        for v in variants:
            by = recs.get(v.key, {})
            n = sum(len(by.get(t.key, [])) for t in mine)
            if v.name in reasons:
                rows.append(SweepRow(model, v.name, v.key, dict(v.values), "infeasible",
                                     reasons[v.name], measurements=n))
                continue
            rows.append(_row(model, mine, v, by, n))
    return rows


def _row(model: str, tasks: Sequence[Task], v: Variant, by: dict[str, list[Record]],
         n: int) -> SweepRow:
    from sim import lower_bound

    best_total = o3_total = bound_total = 0.0
    o3_ok = True
    heaviest: tuple[float, Task, Record] | None = None
    for t in tasks:
        ok = [r for r in by.get(t.key, []) if r.result.status.value == "ok" and r.result.latency_us]
        if not ok:
            return SweepRow(model, v.name, v.key, dict(v.values), "not run" if not n else "infeasible",
                            "" if not n else "no schedule of a task ran", measurements=n)
        best = min(ok, key=lambda r: float(r.result.latency_us or 0.0))
        w = t.count_in(model)
        lat = float(best.result.latency_us or 0.0)
        best_total += w * lat
        if heaviest is None or w * lat > heaviest[0]:
            heaviest = (w * lat, t, best)
        o3 = [r for r in ok if r.prov.tuner == "O3"]
        if o3:
            o3_total += w * float(o3[0].result.latency_us or 0.0)
        else:
            o3_ok = False
        bound_total += w * lower_bound(t.graph, t.batch, v.target)
    assert heaviest is not None
    floor, limit = _bound_of(heaviest[1], heaviest[2], v.target)
    batch = tasks[0].batch
    o3_us = o3_total if o3_ok else None
    return SweepRow(model, v.name, v.key, dict(v.values), "ok", "", best_total,
                    batch * 1e6 / best_total if best_total else None, bound_total, floor, limit,
                    o3_us, o3_us / best_total if o3_us and best_total else None, n)


def _bound_of(task: Task, rec: Record, target: Target) -> tuple[str, str]:
    """(the floor's binding term, the busiest resource) of the best schedule's simulation."""
    from autotune.report._report import bound_analysis
    from compiler.schedule import GraphSchedule
    from sim import SimError, simulate

    try:
        schedule = GraphSchedule.from_json(dict(rec.schedule))
        res = simulate(task.graph, schedule, target)
        if isinstance(res, SimError):
            return "", res.status
        a = bound_analysis(task.graph, res, target)
    except Exception as exc:  # noqa: BLE001 - a table cell, never a failed sweep
        log.warning("cannot analyse the best schedule of %s on %s: %s", task.name, target.name, exc)
        return "", ""
    limit = a.limit + (" + capacity" if a.capacity_bound else "")
    return a.floor, limit
