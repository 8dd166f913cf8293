"""``TuneResult``: what a tuning job found, task by task and model by model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from autotune.job._tasks import model_names

if TYPE_CHECKING:
    from autotune.job._state import JobState, TaskState
    from compiler.schedule import GraphSchedule

__all__ = ["ModelResult", "TaskResult", "TuneResult"]


@dataclass(frozen=True)
class TaskResult:
    """One task's outcome.

    Attributes:
        key: Workload key.
        name: Task name.
        weight: Occurrences in the models.
        records: Records of the task in the log (all runs).
        new: Measurements of this run.
        errors: Failed measurements by status (all runs).
        best_latency_us: Best latency (None: nothing ran).
        best_throughput_per_s: Chip throughput of the best schedule.
        best_tuner: Who proposed the best (``graphtune-guided``, ``O3``, ``plan:resnet50``...).
        best_schedule: Its schedule JSON (None: nothing ran).
        baselines: Seed label -> measured latency.
        lower_bound_us: The roofline lower bound.
        stopped: Why the task stopped early ("" if it ran to the budget).
    """

    key: str
    name: str
    weight: int
    records: int
    new: int
    errors: dict[str, int]
    best_latency_us: float | None
    best_throughput_per_s: float | None
    best_tuner: str
    best_schedule: dict[str, Any] | None
    baselines: dict[str, float | None]
    lower_bound_us: float
    stopped: str

    def baseline(self, prefix: str) -> float | None:
        """Best measured latency of the seeds whose label starts with ``prefix``."""
        vals = [v for k, v in self.baselines.items() if k.startswith(prefix) and v is not None]
        return min(vals) if vals else None

    def speedup(self, prefix: str) -> float | None:
        """``baseline(prefix) / best_latency_us`` (None if either is missing)."""
        base = self.baseline(prefix)
        return base / self.best_latency_us if base and self.best_latency_us else None

    @property
    def latency_over_bound(self) -> float | None:
        """Best latency over the lower bound."""
        if not self.best_latency_us or not self.lower_bound_us:
            return None
        return self.best_latency_us / self.lower_bound_us

    def schedule(self) -> GraphSchedule | None:
        """The best schedule as a value."""
        from compiler.schedule import GraphSchedule

        return GraphSchedule.from_json(self.best_schedule) if self.best_schedule else None

    def to_json(self) -> dict[str, Any]:
        """Keyed JSON (without the schedule)."""
        return {
            "key": self.key, "name": self.name, "weight": self.weight, "records": self.records,
            "new": self.new, "errors": self.errors, "best_latency_us": self.best_latency_us,
            "best_throughput_per_s": self.best_throughput_per_s, "best_tuner": self.best_tuner,
            "baselines": self.baselines, "lower_bound_us": self.lower_bound_us,
            "speedup_over_O3": self.speedup("O3"), "speedup_over_plan": self.speedup("plan:"),
            "speedup_over_best_level": self.speedup("O"),
            "latency_over_bound": self.latency_over_bound, "stopped": self.stopped,
        }


@dataclass(frozen=True)
class ModelResult:
    """Estimated NPU latency of one inference of a model: the sum over its tasks."""

    name: str
    best_us: float | None
    o3_us: float | None
    plan_us: float | None
    best_level_us: float | None

    def to_json(self) -> dict[str, Any]:
        """Keyed JSON."""
        return {"name": self.name, "best_us": self.best_us, "o3_us": self.o3_us,
                "plan_us": self.plan_us, "best_level_us": self.best_level_us}


@dataclass(frozen=True)
class TuneResult:
    """What :func:`autotune.tune` returns.

    Attributes:
        tasks: Per task.
        models: Per model: estimated end-to-end NPU latency, tuned and baselines.
        log: The log path.
        storage: Where the studies are (journal path or URL).
        curve: The tuning-curve PNG (None if not drawn).
        measured: Measurements of this run.
        total: Records of the job's tasks in the log.
        seconds: Wall time of the measuring loop.
    """

    tasks: tuple[TaskResult, ...]
    models: tuple[ModelResult, ...]
    log: str
    storage: str
    curve: str | None
    measured: int
    total: int
    seconds: float

    @property
    def measurements_per_s(self) -> float:
        """This run's measurements per second."""
        return self.measured / self.seconds if self.seconds > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        """Keyed JSON (what ``graphtune tune --json`` prints)."""
        return {
            "log": self.log, "storage": self.storage, "curve": self.curve,
            "measured": self.measured, "total": self.total, "seconds": self.seconds,
            "measurements_per_s": self.measurements_per_s,
            "tasks": [t.to_json() for t in self.tasks], "models": [m.to_json() for m in self.models],
        }

    @classmethod
    def of(cls, job: JobState, log: str, storage: str, curve: str | None) -> TuneResult:
        """Snapshot a finished job."""
        tasks = tuple(_task_result(t) for t in job.tasks)
        models = tuple(
            ModelResult(m, job.model_latency(m), job.model_latency(m, "O3"),
                        job.model_latency(m, "plan:"), job.model_latency(m, "O"))
            for m in model_names([t.task for t in job.tasks])
        )
        return cls(tasks, models, log, storage, curve, job.measured_now, job.total, job.seconds)


def _task_result(t: TaskState) -> TaskResult:
    b = t.best
    return TaskResult(
        t.task.key, t.task.name, t.task.weight, t.records, t.new, dict(t.errors),
        b.latency_us if b else None, b.throughput_per_s if b else None, b.tuner if b else "",
        b.schedule if b else None, dict(t.baselines), t.lower_bound_us, t.stopped,
    )
