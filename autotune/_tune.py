"""``tune``: the tuning job from models to a log of measurements and a result.

Order of work: check the arguments and paths, extract the tasks, read the
log, open the studies and reconcile them with the log, enqueue the seeds, and
only then start the measurers (Ray); measure until the budget is spent; draw
the tuning curve. Every user mistake surfaces before Ray starts.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import socket
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from autotune._options import MeasureOptions, RankerFactory, RunOptions, SearchOptions, from_legacy
from autotune.job._scheduler import GradientScheduler, TaskProgress
from autotune.job._state import JobState, TaskState
from autotune.job._tasks import Task, extract_tasks
from autotune.measure._measurer import Measurer, SimMeasurer
from autotune.report._result import TuneResult
from autotune.running._claims import Claims
from autotune.running._driver import Driver
from autotune.running._journal import StorageHandle, journal_path_for, open_storage
from autotune.running._reconcile import SEED_ATTR, SEED_CID_ATTR, reconcile, record_cid
from autotune.sampling._samplers import make_sampler
from autotune.sampling._studies import (
    OBJECTIVES,
    candidate_id,
    check_sampler,
    seed_schedules,
    study_name,
    task_seed,
    tuner_label,
)
from compiler.errors import GraphtuneError
from compiler.memo import search_gc
from logs import LogError

if TYPE_CHECKING:
    from autotune.running._pool import MeasurePool
    from autotune.sampling._guided import GuidedOptions
    from compiler.graph import Graph
    from compiler.schedule import GraphSchedule
    from compiler.target import Target
    from logs import Record

__all__ = ["check_log_path", "default_workers", "load_tasks", "tune"]

log = logging.getLogger("autotune.tune")

SHORT_BUDGET_S = 60.0
"""With less than this left of a time budget when measuring would start, a job whose
workers were not given measures in its own process: starting Ray (seconds, tens of
seconds on a loaded machine) would take a large part of it."""

SCREEN = 4.0
"""``GuidedOptions.screen`` of a guided job on Ray workers, unless given: a round decodes at
most this many candidates per proposal (an evolution round with parents: polish rounds and
a first round before any parent are not bounded by it). Under the time budget (``breed_budget`` 1.0, the
default until issue 20's tenth session) the compiled core screened 3.3 (ResNet-50 b16), 4.4
(BERT-base s128 b8) and 5.2 (gpt1) candidates per measurement in 2-worker tunes at load 8-11
(``bench/results/tuning.md``), and the Python decoder sat at its floor (one per proposal): a
faster decoder bought more screening, not more measurements. Counted in candidates, the
breeding effort is the same whatever the decoder, the measurer or the machine's load. A time budget
is still there when asked for (``GuidedOptions(breed_budget=1.0)``, the old default; h76
measured 0.5 in issue 20's eighth session: 10-19 % less CPU per measurement, less selected
picks, ``bench/results/space_ccore.md``)."""

FIT_BUDGET = 0.125
"""``GuidedOptions.fit_budget`` of a guided job on Ray workers, unless given: a retraining
waits for as many measurements as take eight times its time to measure. On gpt1 (a
candidate measured in ~1.5 ms, a fit ~47 ms) 10 retrainings in 300 measurements cost
1.6-2.3 ms of the driver's CPU per measurement, more than measuring
(``bench/results/sim_vs_tune.md``, h89). 0.5 until issue 20's h119: on BERT-base s128 b8
and ResNet-50 b16 the retrainings were 1.0-1.7 ms of the driver's CPU per measurement, its
largest part (a cost both decoders share: it counted four times in issue 20's 5x); at 0.125
the budget decides the retrainings after the first few (a 400-trial 2-worker BERT-base
tune retrained at 21, 37, 85, 207 and 306 rows, the budget asking 27, 92 and 80 apart where
``retrain_growth`` asked 9, 21 and 52). ``bench/tune_quality.py`` at 1,000 measurements
(seed 0) found best schedules on its four models within the committed results' bars with
0.25 and with 0.125 (``bench/results/tuning.md``). Late in a long tune a retraining's rows make it slower, so
retrainings grow rarer (about eight fits' time of measuring apart)."""

FEW_WORKERS_BATCH = 8
"""Candidates per batch by default (``RunOptions.batch_size`` None) on a Ray pool of at most
:data:`FEW_WORKERS` workers (4 otherwise, and in process). A batch is one Ray call each
way: its fixed costs (the driver's submit and collection, the worker's call, Ray's
threads) per measurement halve. On gpt1 (a measurement ~1.4 ms), 2 workers, 300
measurements, back to back at load 4.9-5.2: 7.71 / 7.16 ms of CPU per measurement with
batches of 4, 7.00 / 6.62 with 8 (driver loop -0.2, worker Ray threads -0.18; h92, issue
20). Not with many workers: the driver keeps ``2 x workers x batch`` proposals in flight,
and breeding rounds are sized by that."""
FEW_WORKERS = 8


def default_workers() -> int:
    """Measurer processes by default: one per CPU."""
    return max(1, os.cpu_count() or 1)


def check_log_path(path: str | os.PathLike[str]) -> str:
    """The log path as a string, if a log can be appended there.

    Raises:
        LogError: its directory is missing or not writable, or it is a directory
            or an unwritable file.
    """
    p = Path(path)
    if p.is_dir():
        raise LogError(f"cannot write the log {p}: it is a directory")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise LogError(f"cannot write the log {p}: directory {parent} does not exist")
    if p.exists():
        if not os.access(p, os.W_OK):
            raise LogError(f"cannot write the log {p}: permission denied")
    elif not os.access(parent, os.W_OK | os.X_OK):
        raise LogError(f"cannot write the log {p}: directory {parent} is not writable")
    return os.fspath(p)


def load_tasks(models: Iterable[Any], batch: int | None = None) -> list[Task]:
    """Tasks of models given as ONNX paths, ``compiler.Model``, ``Graph`` or ``Task`` values."""
    from compiler.graph import Graph
    from compiler.model import Model
    from compiler.torch_import import load_model_file as load_onnx  # .onnx or .pt2

    tasks: list[Task] = []
    pairs: list[tuple[str, Graph]] = []
    for item in models:
        if isinstance(item, Task):
            tasks.append(item)
            continue
        if isinstance(item, str | os.PathLike):
            item = load_onnx(item)
        if isinstance(item, Model):
            if batch is not None:
                item.set_batch(batch)
            pairs.append((item.name, item.graph))
        elif isinstance(item, Graph):
            pairs.append((item.name, item))
        else:
            raise GraphtuneError(f"cannot tune a {type(item).__name__}: give ONNX paths, "
                                 "Models, Graphs or Tasks")
    if pairs:
        tasks.extend(extract_tasks(pairs))
    if not tasks:
        raise GraphtuneError("nothing to tune: give at least one model")
    return tasks


def tune(
    models_or_tasks: Iterable[Any],
    *,
    trials: int,
    log: str | os.PathLike[str],
    target: Target | str | os.PathLike[str] | None = None,
    search: SearchOptions | None = None,
    run: RunOptions | None = None,
    measure: MeasureOptions | None = None,
    **legacy: Any,
) -> TuneResult:
    """Tune the graph schedules of some models; every measurement goes to ``log``.

    Re-running with the same log (and storage) resumes: candidates in the log
    are not measured again and ``trials`` counts the log's records of these
    tasks, so the job ends when the log holds that many.

    Args:
        models_or_tasks: ONNX paths, ``compiler.Model``/``Graph`` values or ``Task`` values.
        trials: Records of these tasks the log should hold at the end (seeds included).
        log: The JSON-lines tuning log (appended; created if missing).
        target: A ``Target``, a hardware TOML path, or None for the default STCP920.
        search: What to search: sampler, seed, objective, model batch, early stopping,
            the guided sampler's options and ranker, seeds (:class:`SearchOptions`).
        run: How to run: workers, storage, Ray, batch size, callbacks, the curve
            (:class:`RunOptions`).
        measure: How to measure: the measurer, its options, the timeout per trial
            (:class:`MeasureOptions`).
        **legacy: The keyword arguments ``tune`` took before the option types
            (``workers=``, ``seed=``, ``measurer_options=``, ...): accepted until after
            graphtune 0.2 with a DeprecationWarning, sorted into the options (see
            :func:`autotune._options.from_legacy`).

    Returns:
        A :class:`TuneResult`.

    Raises:
        GraphtuneError: a bad argument, model, target, log or storage; raised before
            any measurer starts.

    Example:
        >>> res = tune(["r50.onnx"], trials=300, log="tune.jsonl",
        ...            search=SearchOptions(seed=0), run=RunOptions(workers=2))
        >>> res.tasks[0].speedup("O3"), res.curve
    """
    from compiler.target import Target

    search, run, measure = from_legacy(search, run, measure, legacy)
    sampler, seed, objective, batch = search.sampler, search.seed, search.objective, search.batch
    early_stopping, guided, ranker, seeds = (search.early_stopping, search.guided, search.ranker,
                                             search.seeds)
    workers, storage, ray_address, worker_cpus = run.workers, run.storage, run.ray_address, \
        run.worker_cpus
    worker_resources = dict(run.worker_resources) if run.worker_resources is not None else None
    batch_size, callbacks, curve = run.batch_size, run.callbacks, run.curve
    warm_schedules, pretrained, notify = search.warm_schedules, search.pretrained, run.notify
    measurer, timeout_per_trial = measure.measurer, measure.timeout_per_trial
    measurer_options = dict(measure.options) if measure.options is not None else None

    time_budget_s, started = run.time_budget_s, run.started
    t0 = time.monotonic() if started is None else started
    if trials < 1:
        raise GraphtuneError(f"trials must be >= 1, got {trials}")
    if time_budget_s is not None and not 0 < time_budget_s < float("inf"):
        raise GraphtuneError(f"the time budget must be > 0 s, got {time_budget_s:g}")
    if objective not in OBJECTIVES:
        raise GraphtuneError(f"unknown objective {objective!r}: choose one of {', '.join(OBJECTIVES)}")
    check_sampler(sampler)
    n_workers = default_workers() if workers is None else workers
    if n_workers < 0:
        raise GraphtuneError(f"workers must be >= 0, got {n_workers}")
    if timeout_per_trial is not None and timeout_per_trial <= 0:
        raise GraphtuneError(f"the timeout per trial must be > 0 s, got {timeout_per_trial}")
    if isinstance(target, str | os.PathLike):
        target = Target.from_file(os.fspath(target))
    tgt = target or Target.default()
    log_path = check_log_path(log)
    if worker_cpus is not None and not 0 <= worker_cpus < float("inf"):
        raise GraphtuneError(f"worker CPUs must be >= 0, got {worker_cpus}")
    meas = _measurer(measurer, measurer_options, n_workers)
    tasks = load_tasks(models_or_tasks, batch)

    # Files this job would create; until measuring starts, a failure removes them again.
    private = [] if storage is not None else [journal_path_for(log_path)]
    created = [p for p in (log_path, *private, *(f"{p}.claims" for p in private))
               if not os.path.lexists(p)]
    measuring = failed = False
    lock = _lock_log(log_path)
    handle: StorageHandle | None = None
    claims: Claims | None = None
    try:
        owner = f"{socket.gethostname()}:{os.path.realpath(log_path)}"
        records = _read_log(log_path, tasks, tgt, meas)  # a bad log fails before the storage
        if pretrained and ranker is None and sampler == "guided":
            from autotune.sampling._warm import pretrained_factory

            ranker = pretrained_factory(records, notify)
        handle = open_storage(storage, log_path)
        if (workers is None and ray_address is None and n_workers > 0
                and time_budget_s is not None
                and t0 + time_budget_s - time.monotonic() < SHORT_BUDGET_S):
            n_workers = 0  # Ray's start would take a large part of what is left
            if notify is not None:
                notify(f"{max(t0 + time_budget_s - time.monotonic(), 0):.0f} s of the time "
                       "budget left: measuring in this process, without Ray workers")
        if n_workers > 0 and sampler == "guided":
            # Workers measure while the driver proposes: retrain the cost model on a thread
            # rather than stall them (in-process runs stay reproducible without it).
            from dataclasses import replace

            from autotune.sampling._guided import GuidedOptions

            # ...and screen a fixed number of bred candidates per measurement (a time
            # budget only when asked for).
            guided = guided or GuidedOptions()
            screen = guided.screen
            if screen is None and guided.breed_budget is None:
                screen = SCREEN
            fit_budget = guided.fit_budget if guided.fit_budget is not None else FIT_BUDGET
            guided = replace(guided, background_fit=True, screen=screen, fit_budget=fit_budget)
        job = _setup(tasks, records, handle, tgt, sampler, seed, objective, guided, ranker,
                     trials, n_workers, seeds, owner if handle.shared else None, warm_schedules)
        if time_budget_s is not None:
            job.deadline = t0 + time_budget_s
        if handle.shared:
            claims = Claims(handle)
        if job.total >= job.budget:
            n_workers = 0  # the log holds the budget: nothing to measure, so no Ray
        scheduler = _scheduler(job, seed, early_stopping)
        from logs import RecordWriter

        with RecordWriter(log_path) as writer, _pool(job, tgt, meas, n_workers, ray_address,
                                                     timeout_per_trial, worker_cpus,
                                                     worker_resources, job.deadline) as pool:
            job.workers = pool.workers
            driver = Driver(job, scheduler, pool, writer, handle, tgt, meas, objective,
                            tuner_label(sampler), default_batch(batch_size, pool), callbacks,
                            claims, owner)
            job.started = time.monotonic()
            measuring = True
            with search_gc():  # models, spaces and studies are loaded (see its doc)
                driver.run()
            job.ended = time.monotonic()
        handle.flush()
        curve_path = None
        if curve:
            from autotune.report._curve import curve_path_for, draw_curve

            curve_path = draw_curve(job, curve_path_for(log_path))
        return TuneResult.of(job, log_path, handle.where, curve_path)
    except BaseException:
        failed = True
        raise
    finally:
        late: GraphtuneError | None = None  # a close's error: after the job's own, if any
        for close in [c.close for c in (claims, handle) if c is not None]:
            try:
                close()
            except GraphtuneError as exc:
                if failed:  # the job's error is the one to see; this one is said beside it
                    logging.getLogger("autotune.tune").warning("%s", exc)  # (`log` is the path)
                elif late is None:
                    late = exc
        os.close(lock)
        if failed and not measuring:
            for path in created:  # the job failed before it measured: leave nothing behind
                with contextlib.suppress(OSError):
                    os.unlink(path)
        if late is not None:
            raise late


def _measurer(measurer: Measurer | str | None, options: dict[str, Any] | None,
              workers: int) -> Measurer:
    """The measurer to use; checked to travel to Ray workers (pickle) when there are any."""
    if isinstance(measurer, str):
        from autotune.measure._plugins import load_measurer

        meas = load_measurer(measurer, options)
    elif options:
        raise GraphtuneError("measurer options need a measurer spec (module:Class or a name), "
                             "not a Measurer instance")
    else:
        meas = measurer or SimMeasurer()
    if not isinstance(meas, Measurer):
        raise GraphtuneError(f"measurer must be an autotune.Measurer, got {type(meas).__name__}")
    if workers > 0:
        import cloudpickle

        try:
            cloudpickle.dumps(meas)
        except Exception as exc:  # noqa: BLE001 - pickling raises many kinds
            raise GraphtuneError(f"the measurer {type(meas).__name__} cannot be sent to Ray "
                                 f"workers (pickle: {exc}); keep only configuration in it, "
                                 "or use --workers 0") from None
    return meas


def _lock_log(path: str) -> int:
    """Hold an exclusive advisory lock on the log for the job (one driver per log)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise LogError(f"{path} is being written by another graphtune tune: wait for it, or "
                       "tune into another log") from None
    return fd


def _read_log(path: str, tasks: Sequence[Task], target: Target, measurer: Measurer
              ) -> dict[str, list[tuple[Record, str]]]:
    """Usable records of each task, in log order: same target, measurer and version."""
    import warnings

    from logs import LogWarning, read_records

    out: dict[str, list[tuple[Record, str]]] = {t.key: [] for t in tasks}
    if not os.path.getsize(path):
        return out
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", LogWarning)
        for rec in read_records(path):
            bucket = out.get(rec.workload.key)
            if bucket is None or rec.target.chip != target.name or rec.target.hash != target.hash:
                continue
            if rec.prov.measurer != measurer.name or rec.prov.measurer_version != measurer.version:
                continue
            cid = record_cid(rec)
            if cid is not None:
                bucket.append((rec, cid))
    for w in caught:
        log.warning("%s", w.message)
    return out


def _setup(tasks: Sequence[Task], records: dict[str, list[tuple[Record, str]]],
           handle: StorageHandle, target: Target, sampler: str, seed: int | None,
           objective: str, guided: GuidedOptions | None, ranker: RankerFactory | None,
           trials: int, workers: int, seeds: bool, owner: str | None,
           warm: Mapping[str, Sequence[GraphSchedule]] | None = None) -> JobState:
    """Spaces, studies (reconciled with the log) and seeds of every task.

    ``owner`` names this driver on a shared storage (None on a private one).
    """
    import optuna

    from autotune.running._driver import note_measurement
    from autotune.sampling._ranker import default_ranker
    from search_space import build_space
    from sim import Measurement, lower_bound

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    states: list[TaskState] = []
    for task in tasks:
        space = build_space(task.graph, target, task.batch)
        name = study_name(task.key, target, objective)
        sseed = task_seed(seed, name)
        kwargs: dict[str, Any] = {}
        if sampler == "guided":
            make = ranker or default_ranker
            kwargs = {"space": space, "ranker": make(space, task.graph, target, sseed),
                      "objective": objective}
            if guided is not None:
                kwargs["options"] = guided
        study = optuna.create_study(
            study_name=name, storage=handle.storage, sampler=make_sampler(sampler, sseed, **kwargs),
            direction="minimize" if objective == "latency" else "maximize", load_if_exists=True)
        _name_objective(study, objective)
        ts = TaskState(task, space, study)
        ts.choices = {d.name: list(d.choices) for d in space.free}
        ts.lower_bound_us = lower_bound(task.graph, task.batch, target)
        logged = records[task.key]
        for rec, cid in logged:
            r = rec.result
            m = Measurement(r.status.value, r.latency_us, r.throughput_per_s, ts.lower_bound_us,
                            r.error, 0.0)
            note_measurement(ts, objective, rec.prov.tuner, dict(rec.schedule), rec.prov.trial,
                             m, cid)
        reconcile(study, space, logged, objective, owner, ts.lower_bound_us)
        if warm and warm.get(task.key):
            # before O0-O3: a nearby target's best is likelier near this one's best than the
            # levels are (where the levels' L1 heuristics break, they are several times off)
            from autotune.sampling._warm import enqueue_warm

            levels = [s for _, s in seed_schedules(task.graph, target)] if seeds else []
            enqueue_warm(ts, warm[task.key], target, levels)
        if seeds:
            _enqueue_seeds(ts, target)
        states.append(ts)
    handle.flush()
    return JobState(states, trials, workers)


def _name_objective(study: Any, objective: str) -> None:
    """Name the study's value (optuna-dashboard shows "latency_us", not "Objective 0")."""
    import warnings

    name = "latency_us" if objective == "latency" else "throughput_per_s"
    if study.metric_names != [name]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # experimental in some Optuna versions
            study.set_metric_names([name])


def _enqueue_seeds(ts: TaskState, target: Target) -> None:
    """Enqueue O0-O3 and the fitting plans not measured yet (projected into the space).

    A seed whose schedule was measured already (under any label) gets its
    baseline from that measurement; one the space cannot express is measured
    as it is, outside the study. A seed whose trial was lost (``worker_lost``: a failed
    trial) is queued again; one queued, running or complete already is not.
    """
    from optuna.trial import TrialState

    queued = [t.system_attrs.get("fixed_params", t.params) for t in ts.study.get_trials(
        deepcopy=False, states=(TrialState.WAITING, TrialState.RUNNING, TrialState.COMPLETE))]
    enqueued: set[str] = set()
    for label, s in seed_schedules(ts.task.graph, target):
        cid = candidate_id(s)
        ts.seed_cids[label] = cid
        if cid in ts.latency or cid in enqueued:
            continue
        enqueued.add(cid)
        proj = ts.space.project(s)
        if proj.schedule is None:
            log.info("task %s: seed %s is outside the space (%s); measured as it is",
                     ts.task.name, label, proj.reason)
            ts.seeds_direct.append((label, s))
            continue
        if dict(proj.params) in queued:
            continue
        ts.study.enqueue_trial(dict(proj.params),
                               user_attrs={SEED_ATTR: label, SEED_CID_ATTR: cid})


def _scheduler(job: JobState, seed: int | None, early_stopping: int | None) -> GradientScheduler:
    progress = [TaskProgress(float(t.task.weight), t.lower_bound_us) for t in job.tasks]
    sched = GradientScheduler(progress, np.random.default_rng(seed), early_stopping=early_stopping)
    for k, t in enumerate(job.tasks):
        for latency in t.history:  # replay the log: a resumed job knows its progress
            sched.record(k, latency)
        t.stopped = sched.tasks[k].stopped
    return sched


def default_batch(batch_size: int | None, pool: MeasurePool) -> int:
    """``RunOptions.batch_size``, its default (None) resolved for ``pool``: see
    :data:`FEW_WORKERS_BATCH`."""
    if batch_size is not None:
        return batch_size
    return FEW_WORKERS_BATCH if pool.remote and pool.workers <= FEW_WORKERS else 4


def _pool(job: JobState, target: Target, measurer: Measurer, workers: int,
          ray_address: str | None, timeout_s: float | None, cpus: float | None,
          resources: dict[str, float] | None, deadline: float | None = None) -> MeasurePool:
    graphs = {t.task.key: t.task.graph for t in job.tasks}
    if workers == 0:
        from autotune.running._pool import InProcessPool

        return InProcessPool(graphs, target, measurer, timeout_s)
    from autotune.running._ray_pool import RayPool

    return RayPool(graphs, target, measurer, workers, ray_address, timeout_s, num_cpus=cpus,
                   resources=resources, deadline=deadline)
