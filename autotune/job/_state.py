"""What the tuning job knows, task by task: values the driver updates and callbacks read."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from optuna.study import Study

    from autotune.job._tasks import Task
    from compiler.schedule import GraphSchedule
    from search_space import Space

__all__ = ["Best", "JobState", "TaskState"]


@dataclass
class Best:
    """The best measured candidate of a task so far."""

    latency_us: float
    throughput_per_s: float | None
    schedule: dict[str, Any]
    tuner: str
    trial: int | None


@dataclass
class TaskState:
    """One task during a job.

    Attributes:
        task: The task.
        space: Its search space.
        study: Its Optuna study.
        measured: Candidate id -> objective value (None: failed) of every candidate in
            the log (earlier runs included); never measured again.
        latency: Candidate id -> latency (None: failed) of the same candidates, and of
            seeds another driver measured on a shared study.
        history: Latency of each of the task's records in log order (None: failed).
        seed_cids: Seed label (``O3``, ``plan:resnet50``) -> its candidate id (two seeds
            may be one candidate: DeepFM's O3 is the guide's plan).
        lower_bound_us: The simulator's roofline bound of the task.
        best: The best candidate (by the objective), or None.
        curve: ``(task measurement number, best latency so far)`` after each measurement.
        records: Records of this task in the log (all runs).
        errors: Failed measurements by status (all runs).
        raised: Candidates whose worker raised once (all runs): recorded ``worker_lost``
            and measured again; a second raise makes them ``sim_error``.
        new: Measurements of this run.
        seeds_direct: Seeds the space cannot express, measured outside the study.
        choices: Parameter name -> its choices (what ``suggest_categorical`` takes).
        dup_streak: Proposals in a row that were already measured.
        stopped: Why the task gets no more measurements ("" while live).
    """

    task: Task
    space: Space
    study: Study
    measured: dict[str, float | None] = field(default_factory=dict)
    latency: dict[str, float | None] = field(default_factory=dict)
    history: list[float | None] = field(default_factory=list)
    seed_cids: dict[str, str] = field(default_factory=dict)
    choices: dict[str, list[Any]] = field(default_factory=dict)
    lower_bound_us: float = 0.0
    best: Best | None = None
    curve: list[tuple[int, float]] = field(default_factory=list)
    records: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    raised: set[str] = field(default_factory=set)
    new: int = 0
    seeds_direct: list[tuple[str, GraphSchedule]] = field(default_factory=list)
    dup_streak: int = 0
    stopped: str = ""

    @property
    def baselines(self) -> dict[str, float | None]:
        """Seed label -> measured latency (None: failed or not measured yet)."""
        return {label: self.latency.get(cid) for label, cid in self.seed_cids.items()}

    @property
    def best_latency_us(self) -> float | None:
        """Latency of the best candidate (None before a success)."""
        return self.best.latency_us if self.best else None

    def baseline(self, prefix: str) -> float | None:
        """The best measured latency among seeds whose label starts with ``prefix``."""
        vals = [v for k, v in self.baselines.items() if k.startswith(prefix) and v is not None]
        return min(vals) if vals else None

    def speedup(self, prefix: str) -> float | None:
        """Baseline latency over the best latency (None if either is missing)."""
        base = self.baseline(prefix)
        best = self.best_latency_us
        return base / best if base and best else None


NO_TRIAL_LIMIT = 10**12
"""The trial budget of a job bounded by its time budget only (``tune --time-budget`` without
``--trials``): far more than any job measures, shown as no limit."""


@dataclass
class JobState:
    """The whole job: tasks, counters and timing (what progress callbacks read).

    Attributes:
        tasks: One state per task.
        budget: Records the job's tasks should have in the log when it ends.
        started: ``time.monotonic()`` at the start of measuring.
        ended: ``time.monotonic()`` when measuring ended (None while it runs).
        measured_now: Measurements of this run.
        workers: Parallel measurers.
        rounds: Batches finished in this run.
        deadline: ``time.monotonic()`` after which no new batch is sent (``--time-budget``;
            batches in flight finish and are logged); None: no time limit.
    """

    tasks: list[TaskState]
    budget: int
    workers: int
    started: float = field(default_factory=time.monotonic)
    ended: float | None = None
    measured_now: int = 0
    rounds: int = 0
    deadline: float | None = None

    @property
    def counted(self) -> str:
        """``"120/300"`` (measurements in the log / the trial budget), or ``"120"`` for a job
        bounded by its time budget only."""
        return f"{self.total}" + ("" if self.budget >= NO_TRIAL_LIMIT else f"/{self.budget}")

    @property
    def out_of_time(self) -> bool:
        """The time budget is used up."""
        return self.deadline is not None and time.monotonic() >= self.deadline

    @property
    def eta_s(self) -> float | None:
        """Seconds left: the remaining measurements at this run's rate, capped by the deadline."""
        left = max(self.budget - self.total, 0)
        eta = left / self.rate if self.rate > 0 else None
        if self.deadline is not None:
            cap = max(self.deadline - time.monotonic(), 0.0)
            eta = cap if eta is None else min(eta, cap)
        return eta

    @property
    def total(self) -> int:
        """Records of the job's tasks in the log (earlier runs included)."""
        return sum(t.records for t in self.tasks)

    @property
    def seconds(self) -> float:
        """Time measuring took (so far, while it runs)."""
        return (self.ended or time.monotonic()) - self.started

    @property
    def rate(self) -> float:
        """Measurements per second in this run."""
        s = self.seconds
        return self.measured_now / s if s > 0 else 0.0

    def model_latency(self, model: str, which: str = "best") -> float | None:
        """Estimated NPU latency of one inference of ``model``: the sum over its tasks.

        Args:
            model: A model name.
            which: ``"best"`` (tuned) or a baseline prefix (``"O3"``, ``"plan"``).
        """
        total = 0.0
        for t in self.tasks:
            count = t.task.count_in(model)
            if not count:
                continue
            value = t.best_latency_us if which == "best" else t.baseline(which)
            if value is None:
                return None
            total += count * value
        return total
