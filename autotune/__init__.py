"""graphtune's top layer: tuning jobs, ApplyHistoryBest and the CLI.

Example:
    >>> from autotune import tune, ApplyHistoryBest
    >>> result = tune(["r50.onnx"], trials=300, workers=2, log="tune.jsonl", seed=0)
    >>> result.tasks[0].speedup("O3"), result.curve
    >>> with ApplyHistoryBest("tune.jsonl"):
    ...     model.compile("r50.stcobj")

A hardware what-if: the same models tuned on variants of the chip, one log.
    >>> from autotune import make_variants, parse_set, sweep
    >>> vs = make_variants(Target.default(), [parse_set("l1.data_bytes=512K,1M")])
    >>> sweep(["mbv2.onnx"], vs, trials_per_variant=200, log="sweep.jsonl", out="sweep/")

A farm: several jobs, each with its own log, share one study through a storage
and never measure a candidate twice; ``graphtune distill`` merges their logs.
    >>> tune(["r50.onnx"], trials=2000, log="host1.jsonl", seed=1,
    ...      storage="postgresql://tuner@db-host/graphtune")
"""

from autotune._apply_history import ApplyHistoryBest
from autotune._delayed import DelayedMeasurer
from autotune._measurer import Measurer, SimMeasurer
from autotune._result import ModelResult, TaskResult, TuneResult
from autotune._scheduler import GradientScheduler, TaskProgress
from autotune._state import JobState, TaskState
from autotune._tasks import Task, TaskUse, extract_tasks
from autotune._tune import tune

_LAZY = {"GuidedOptions": "autotune._guided", "GuidedSampler": "autotune._guided",
         "sweep": "autotune._sweep", "make_variants": "autotune._sweep_targets",
         "parse_set": "autotune._sweep_targets"}


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
    "Measurer",
    "ModelResult",
    "SimMeasurer",
    "Task",
    "TaskProgress",
    "TaskResult",
    "TaskState",
    "TaskUse",
    "TuneResult",
    "extract_tasks",
    "make_variants",
    "parse_set",
    "sweep",
    "tune",
]
