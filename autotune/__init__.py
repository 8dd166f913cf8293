"""graphtune's top layer: tuning jobs, ApplyHistoryBest and the CLI.

Example:
    >>> from autotune import tune, ApplyHistoryBest
    >>> from autotune import RunOptions, SearchOptions
    >>> result = tune(["r50.onnx"], trials=300, log="tune.jsonl",
    ...               search=SearchOptions(seed=0), run=RunOptions(workers=2))
    >>> result.tasks[0].speedup("O3"), result.curve
    >>> with ApplyHistoryBest("tune.jsonl"):
    ...     model.compile("r50.stcobj")

A farm: several jobs, each with its own log, share one study through a storage
and never measure a candidate twice; ``graphtune distill`` merges their logs.
    >>> tune(["r50.onnx"], trials=2000, log="host1.jsonl", search=SearchOptions(seed=1),
    ...      run=RunOptions(storage="postgresql://tuner@db-host/graphtune"))

Rooms (see ARCHITECTURE.md): ``autotune.job`` (tasks, job state, task scheduler),
``autotune.sampling`` (studies, samplers, guided sampler, breeding, ranker),
``autotune.measure`` (measurers), ``autotune.running`` (driver, pools, storage,
claims), ``autotune.report`` (result, progress, curve, bound report),
``autotune.commands`` (the CLI's subcommands); ``tune`` and its options and
``ApplyHistoryBest`` live here at the top.
"""

from autotune._apply_history import ApplyHistoryBest
from autotune._options import MeasureOptions, RunOptions, SearchOptions
from autotune._tune import tune
from autotune.job._scheduler import GradientScheduler, TaskProgress
from autotune.job._state import JobState, TaskState
from autotune.job._tasks import Task, TaskUse, extract_tasks
from autotune.measure._delayed import DelayedMeasurer
from autotune.measure._measurer import Measurer, SimMeasurer
from autotune.report._result import ModelResult, TaskResult, TuneResult
from compiler.moved import keep_old_paths

# Modules moved into the rooms in 0.1; their old paths import, with a DeprecationWarning,
# until 0.2.
_MOVED = {
    "autotune._tasks": "autotune.job._tasks",
    "autotune._state": "autotune.job._state",
    "autotune._scheduler": "autotune.job._scheduler",
    "autotune._studies": "autotune.sampling._studies",
    "autotune._guided": "autotune.sampling._guided",
    "autotune._breed": "autotune.sampling._breed",
    "autotune._ranker": "autotune.sampling._ranker",
    "autotune._measurer": "autotune.measure._measurer",
    "autotune._delayed": "autotune.measure._delayed",
    "autotune._plugins": "autotune.measure._plugins",
    "autotune._driver": "autotune.running._driver",
    "autotune._pool": "autotune.running._pool",
    "autotune._ray_pool": "autotune.running._ray_pool",
    "autotune._claims": "autotune.running._claims",
    "autotune._journal": "autotune.running._journal",
    "autotune._reconcile": "autotune.running._reconcile",
    "autotune._report_html": "autotune.report._report_html",
    "autotune._report": "autotune.report._report",
    "autotune._curve": "autotune.report._curve",
    "autotune._progress": "autotune.report._progress",
    "autotune._result": "autotune.report._result",
    "autotune._commands": "autotune.commands",
}
keep_old_paths(_MOVED, version="0.2")

_LAZY = {"GuidedOptions": "autotune.sampling._guided", "GuidedSampler": "autotune.sampling._guided"}


def __getattr__(name: str) -> object:
    # The guided sampler subclasses Optuna's BaseSampler: import Optuna only when asked,
    # so the CLI starts fast.
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'autotune' has no attribute {name!r}")

__all__ = [
    "ApplyHistoryBest",
    "DelayedMeasurer",
    "GradientScheduler",
    "GuidedOptions",
    "GuidedSampler",
    "JobState",
    "MeasureOptions",
    "Measurer",
    "ModelResult",
    "RunOptions",
    "SearchOptions",
    "SimMeasurer",
    "Task",
    "TaskProgress",
    "TaskResult",
    "TaskState",
    "TaskUse",
    "TuneResult",
    "extract_tasks",
    "tune",
]
