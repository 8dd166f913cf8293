"""The task scheduler: which task gets the next batch of measurements.

Ansor's gradient scheduler (Zheng et al., OSDI 2020, section 6): the objective
is the end-to-end latency ``f = sum_i w_i * g_i`` (``g_i`` the best latency of
task ``i``, ``w_i`` how often it runs). The next batch goes to the task whose
latency is expected to fall the most per measurement,

    grad_i = w_i * (alpha * backward_i + (1 - alpha) * forward_i)

with ``backward_i`` the slope of its best latency over its last ``window``
measurements and ``forward_i = min(-g_i / t_i, beta * bound_i - g_i)``, an
optimistic guess: the average gain so far, capped by the distance to the
task's physical floor (the simulator's lower bound; Ansor uses the speed of
similar tasks here). With probability ``eps`` a random live task is picked.
Every task first gets ``warmup`` measurements, round robin. A task stops when
``early_stopping`` measurements in a row did not improve it by more than
``min_gain`` (relative), or when it reaches its floor.

The scheduler is pure bookkeeping over :class:`TaskProgress` values; the
driver reports measurements to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = ["GradientScheduler", "TaskProgress"]


@dataclass
class TaskProgress:
    """What the scheduler knows about one task.

    Attributes:
        weight: Occurrences in the models (``w_i``).
        lower_bound_us: The task's latency floor (0 when unknown).
        best_us: Best latency after each measurement (``inf`` until one succeeds).
        last_gain_at: Measurement count at the last real improvement.
        stopped: Why the task gets no more measurements ("" while live).
    """

    weight: float
    lower_bound_us: float = 0.0
    best_us: list[float] = field(default_factory=list)
    last_gain_at: int = 0
    stopped: str = ""

    @property
    def measured(self) -> int:
        """Measurements so far."""
        return len(self.best_us)

    @property
    def best(self) -> float:
        """The best latency so far (``inf`` before the first success)."""
        return self.best_us[-1] if self.best_us else float("inf")


class GradientScheduler:
    """Ansor's gradient task scheduler (see the module doc).

    Args:
        tasks: One progress record per task (kept and updated in place).
        rng: Randomness for the ε-greedy pick.
        alpha: Weight of the observed slope against the optimistic guess.
        beta: Floor multiplier in the optimistic guess.
        window: Measurements the backward slope looks back over.
        warmup: Measurements every task gets before gradients decide.
        eps: Share of random picks.
        early_stopping: Stop a task after this many measurements without a gain
            (None: never).
        min_gain: Relative improvement that counts as a gain.
    """

    def __init__(self, tasks: Sequence[TaskProgress], rng: np.random.Generator, *,
                 alpha: float = 0.2, beta: float = 1.0, window: int = 16, warmup: int = 8,
                 eps: float = 0.05, early_stopping: int | None = None,
                 min_gain: float = 1e-3) -> None:
        self.tasks = list(tasks)
        self._rng = rng
        self.alpha = alpha
        self.beta = beta
        self.window = window
        self.warmup = warmup
        self.eps = eps
        self.early_stopping = early_stopping
        self.min_gain = min_gain

    def record(self, task: int, latency_us: float | None) -> None:
        """Report one measurement of ``task`` (None: it failed)."""
        t = self.tasks[task]
        before = t.best
        now = before if latency_us is None else min(before, latency_us)
        t.best_us.append(now)
        if now < before * (1 - self.min_gain) or (before == float("inf") and now < before):
            t.last_gain_at = t.measured
        if self.early_stopping is not None and t.measured - t.last_gain_at >= self.early_stopping:
            t.stopped = t.stopped or f"no gain in {self.early_stopping} measurements"
        if t.lower_bound_us and now <= t.lower_bound_us * (1 + self.min_gain):
            t.stopped = t.stopped or "reached the lower bound"

    def stop(self, task: int, why: str) -> None:
        """Take a task out (e.g. its space is exhausted)."""
        self.tasks[task].stopped = self.tasks[task].stopped or why

    def live(self) -> list[int]:
        """Tasks that still get measurements."""
        return [i for i, t in enumerate(self.tasks) if not t.stopped]

    def gradient(self, task: int) -> float:
        """``d f / d t_i`` for one task (negative: measuring it helps)."""
        t = self.tasks[task]
        g = t.best
        if g == float("inf"):
            return -float("inf")  # nothing valid yet: every gain is possible
        n = t.measured
        back_from = t.best_us[max(0, n - 1 - self.window)]
        span = min(self.window, n - 1) or 1
        backward = (g - back_from) / span if back_from != float("inf") else 0.0
        forward = -g / max(n, 1)
        if t.lower_bound_us:
            forward = min(forward, self.beta * t.lower_bound_us - g)
        return t.weight * (self.alpha * backward + (1 - self.alpha) * forward)

    def next_task(self) -> int | None:
        """The task to measure next, or None when every task stopped."""
        live = self.live()
        if not live:
            return None
        cold = [i for i in live if self.tasks[i].measured < self.warmup]
        if cold:
            return min(cold, key=lambda i: (self.tasks[i].measured, i))
        if len(live) > 1 and self._rng.random() < self.eps:
            return live[int(self._rng.integers(len(live)))]
        return min(live, key=lambda i: (self.gradient(i), i))
