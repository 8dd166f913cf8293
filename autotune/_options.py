"""The knobs of :func:`autotune.tune`, grouped: what to search, how to run, how to measure.

As Ray Tune's ``TuneConfig``/``RunConfig`` and TVM's ``TuningOptions``: three frozen
option types, each with defaults that give the usual job, so a call names only what it
changes::

    tune(["r50.onnx"], trials=300, log="tune.jsonl",
         search=SearchOptions(seed=0, sampler="tpe"),
         run=RunOptions(workers=2),
         measure=MeasureOptions(measurer="delayed", options={"delay_s": 0.5}))

The keyword arguments ``tune`` took before (``workers=``, ``seed=``, ...) still work for
one version, with a DeprecationWarning: :func:`from_legacy` sorts them into these types.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from autotune.job._state import JobState
    from autotune.measure._measurer import Measurer
    from autotune.sampling._guided import GuidedOptions
    from autotune.sampling._ranker import Ranker
    from compiler.graph import Graph
    from compiler.schedule import GraphSchedule
    from compiler.target import Target
    from search_space import Space

__all__ = ["LEGACY_VERSION", "MeasureOptions", "RankerFactory", "RunOptions", "SearchOptions",
           "from_legacy"]

RankerFactory = Callable[["Space", "Graph", "Target", "int | None"], "Ranker"]
Callback = Callable[["JobState"], None]

LEGACY_VERSION = "0.2"
"""The old keyword arguments of ``tune`` are accepted until after this version."""


@dataclass(frozen=True)
class SearchOptions:
    """What to search and how to propose candidates.

    Attributes:
        sampler: ``guided`` (graphtune's), ``tpe``, ``gp``, ``nsga2`` or ``random``.
        seed: Seed of every random choice (with ``RunOptions(workers=0)`` the job is
            reproducible).
        objective: ``latency`` (minimise each task's latency) or ``throughput``.
        batch: Batch size of models given as paths or ``Model`` values.
        early_stopping: Stop a task after this many measurements without a gain.
        guided: Options of the guided sampler.
        ranker: Factory of the guided sampler's cost model (default:
            :func:`autotune.sampling._ranker.default_ranker`).
        seeds: Measure O0-O3 and the fitting hand-written plans first (False only for
            search experiments: ``bench/search_efficiency.py`` compares samplers from
            scratch).
        warm_schedules: Workload key -> schedules found elsewhere (a sweep's other
            targets): each is projected into the task's space and, where it fits the
            target and its roofline estimate is not behind the fastest seed's, measured
            before the seeds as an ordinary candidate.
        pretrained: With the guided sampler and no ``ranker``: a task with no records
            on this target yet starts from the shipped pre-trained cost model
            (:func:`cost_model.load_pretrained`) instead of the roofline estimate.
    """

    sampler: str = "guided"
    seed: int | None = None
    objective: str = "latency"
    batch: int | None = None
    early_stopping: int | None = None
    guided: GuidedOptions | None = None
    ranker: RankerFactory | None = None
    seeds: bool = True
    warm_schedules: Mapping[str, Sequence[GraphSchedule]] | None = None
    pretrained: bool = False


@dataclass(frozen=True)
class RunOptions:
    """How the job runs: workers, the study storage, Ray, callbacks, outputs.

    Attributes:
        workers: Measurer processes (Ray actors); 0 measures in this process
            (deterministic with a seed). Default: one per CPU.
        storage: Optuna storage URL (``postgresql://user@host/db`` to share a study
            between hosts; a plain ``postgresql://`` uses psycopg 3), or a journal file
            path; default: a journal next to the log (``tune.jsonl`` -> ``tune.journal``),
            private to that log. A storage given here is shared: several jobs, each
            with its own log, may tune into it at once and never measure one candidate
            twice (each claims a candidate through the storage before measuring it).
        ray_address: Join this Ray cluster instead of starting a local one.
        worker_cpus: CPUs each Ray worker reserves (default: the measurer's ``num_cpus``).
        worker_resources: Custom Ray resources each worker needs, e.g. ``{"stcp920": 1}``
            (default: the measurer's ``resources``); ignored with ``workers=0``.
        batch_size: Candidates per batch sent to a worker. None (the default): 4, or
            :data:`autotune._tune.FEW_WORKERS_BATCH` (8) on a Ray pool of at most
            :data:`autotune._tune.FEW_WORKERS` (8) workers (see there).
        callbacks: Called with the :class:`autotune.JobState` after every measured batch.
        curve: Draw the tuning-curve PNG next to the log.
        notify: Called with a line for the user about how the job starts (the
            pre-trained model in use, or why not).
        time_budget_s: Wall time of the whole ``tune`` call (from ``started``); when it
            is used up no new batch is sent, batches in flight finish and are logged, and
            the job ends as at its trial budget (log, storage and curve complete). Ray's
            start counts: with under ``SHORT_BUDGET_S`` (60 s) left when measuring would
            start and ``workers`` None, the job measures in its own process; the wait for
            Ray workers to start ends at the deadline.
        started: ``time.monotonic()`` the time budget counts from (default: the call's
            start; ``graphtune tune`` passes the command's start).
    """

    workers: int | None = None
    storage: str | None = None
    ray_address: str | None = None
    worker_cpus: float | None = None
    worker_resources: Mapping[str, float] | None = None
    batch_size: int | None = None
    callbacks: Sequence[Callback] = ()
    curve: bool = True
    notify: Callable[[str], None] | None = None
    time_budget_s: float | None = None
    started: float | None = None


@dataclass(frozen=True)
class MeasureOptions:
    """How a candidate is measured.

    Attributes:
        measurer: What measures: a :class:`autotune.Measurer`, or a spec that
            :func:`autotune.measure._plugins.load_measurer` resolves (``"module:Class"``,
            an entry point name of ``graphtune.measurers``, ``"sim"``, ``"delayed"``).
            Default: the simulator.
        options: Keyword arguments of the measurer's constructor (with a spec).
        timeout_per_trial: Wall-time limit of one measurement, in seconds.
    """

    measurer: Measurer | str | None = None
    options: Mapping[str, Any] | None = field(default=None)
    timeout_per_trial: float | None = None


# old keyword of tune() -> (option type, its field)
_LEGACY: dict[str, tuple[str, str]] = {
    "sampler": ("search", "sampler"),
    "seed": ("search", "seed"),
    "objective": ("search", "objective"),
    "batch": ("search", "batch"),
    "early_stopping": ("search", "early_stopping"),
    "guided": ("search", "guided"),
    "ranker": ("search", "ranker"),
    "seeds": ("search", "seeds"),
    "workers": ("run", "workers"),
    "storage": ("run", "storage"),
    "ray_address": ("run", "ray_address"),
    "worker_cpus": ("run", "worker_cpus"),
    "worker_resources": ("run", "worker_resources"),
    "batch_size": ("run", "batch_size"),
    "callbacks": ("run", "callbacks"),
    "curve": ("run", "curve"),
    "measurer": ("measure", "measurer"),
    "measurer_options": ("measure", "options"),
    "timeout_per_trial": ("measure", "timeout_per_trial"),
}


def from_legacy(search: SearchOptions | None, run: RunOptions | None,
                measure: MeasureOptions | None, legacy: Mapping[str, Any]
                ) -> tuple[SearchOptions, RunOptions, MeasureOptions]:
    """The three option values, the old keyword arguments of ``tune`` sorted into them.

    An old keyword overrides the same field of an option value also given. Warns
    (DeprecationWarning) when there are any.

    Raises:
        TypeError: an unknown keyword (as for any function).
    """
    opts: dict[str, Any] = {"search": search or SearchOptions(), "run": run or RunOptions(),
                            "measure": measure or MeasureOptions()}
    if legacy:
        unknown = sorted(set(legacy) - set(_LEGACY))
        if unknown:
            raise TypeError(f"tune() got an unexpected keyword argument {unknown[0]!r}")
        changes: dict[str, dict[str, Any]] = {"search": {}, "run": {}, "measure": {}}
        for key, value in legacy.items():
            group, name = _LEGACY[key]
            changes[group][name] = value
        names = ", ".join(sorted(legacy))
        warnings.warn(f"tune({names}=...) is deprecated: pass search=SearchOptions(...), "
                      "run=RunOptions(...), measure=MeasureOptions(...) (autotune); the old "
                      f"keywords go after graphtune {LEGACY_VERSION}",
                      DeprecationWarning, stacklevel=3)
        for group, fields in changes.items():
            if fields:
                opts[group] = dataclasses.replace(opts[group], **fields)
    return opts["search"], opts["run"], opts["measure"]

