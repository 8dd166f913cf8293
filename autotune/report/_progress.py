"""Progress of a tuning job: a live table on a terminal, plain lines otherwise, a summary.

:class:`ProgressTable` is a job callback (Ansor's per-round table): task,
measurements, best latency, speed-up over O3 and over the hand-written plan,
latency over the lower bound, then the estimated end-to-end latency of each
model, measurements/s and time used. :func:`summary_table` renders a finished
:class:`TuneResult`.
"""

from __future__ import annotations

import time
from typing import IO, TYPE_CHECKING, Any

from autotune.job._tasks import model_names

if TYPE_CHECKING:
    from autotune.job._state import JobState
    from autotune.report._result import TuneResult

__all__ = ["ProgressTable", "summary_table"]


def _x(v: float | None) -> str:
    return f"{v:.3f}x" if v else "-"


def _us(v: float | None) -> str:
    return f"{v:,.1f}" if v else "-"


def _state(job: JobState) -> str:
    """A live task's state: still tuning, or done because the job's budget is spent."""
    if job.total >= job.budget:
        return "done"
    return "time budget" if job.out_of_time else "tuning"


def _eta(job: JobState) -> str:
    """``, ETA 1m 20s`` while measurements are left (by the rate so far, or the time budget)."""
    if job.total >= job.budget or job.ended is not None:
        return ""
    eta = job.eta_s
    if eta is None:
        return ""
    m, s = divmod(round(eta), 60)
    h, m = divmod(m, 60)
    text = f"{h}h {m:02d}m" if h else (f"{m}m {s:02d}s" if m else f"{s}s")
    return f", ETA {text}" + (" (time budget)" if job.deadline is not None
                              and eta >= job.deadline - time.monotonic() - 0.5 else "")


class ProgressTable:
    """A job callback that shows progress on ``stream`` (see the module doc).

    Args:
        stream: Where to write (stderr by the CLI).
        live: Redraw one table in place (a terminal) instead of printing lines.
        every_s: Minimum seconds between two updates.
    """

    def __init__(self, stream: IO[str], live: bool, every_s: float | None = None) -> None:
        self._stream = stream
        self._live_mode = live
        self._every = every_s if every_s is not None else (0.5 if live else 10.0)
        self._last = 0.0
        self._live: Any = None

    def __call__(self, job: JobState) -> None:
        now = time.monotonic()
        done = job.total >= job.budget
        if now - self._last < self._every and not done:
            return
        self._last = now
        if self._live_mode:
            self._draw(job)
        else:
            self._stream.write(self.line(job) + "\n")
            self._stream.flush()

    def close(self) -> None:
        """Stop redrawing (leaves the last table on screen)."""
        if self._live is not None:
            self._live.stop()
            self._live = None

    def _draw(self, job: JobState) -> None:
        from rich.console import Console
        from rich.live import Live

        if self._live is None:
            self._live = Live(self.table(job), console=Console(file=self._stream),
                              auto_refresh=False, transient=False)
            self._live.start()
        self._live.update(self.table(job), refresh=True)

    @staticmethod
    def line(job: JobState) -> str:
        """One plain progress line."""
        parts = [f"tune: {job.counted} measured, {job.rate:.1f}/s, {job.seconds:.0f} s"
                 f"{_eta(job)}"]
        for t in job.tasks:
            if t.best_latency_us:
                parts.append(f"{t.task.name}: best {_us(t.best_latency_us)} µs, "
                             f"{_x(t.speedup('O3'))} O3, {_x(t.speedup('plan:'))} plan")
        return "; ".join(parts)

    @staticmethod
    def table(job: JobState) -> Any:
        """The live table."""
        from rich.table import Table

        tab = Table(title=f"tuning: {job.counted} measurements, "
                          f"{job.rate:.1f}/s on {job.workers} worker(s), {job.seconds:.0f} s"
                          f"{_eta(job)}")
        for col, just in (("task", "left"), ("n", "right"), ("best µs", "right"),
                          ("xO3", "right"), ("xplan", "right"), ("/bound", "right"),
                          ("state", "left")):
            tab.add_column(col, justify=just, overflow="fold")  # type: ignore[arg-type]
        for t in job.tasks:
            bound = t.best_latency_us / t.lower_bound_us if t.best_latency_us and t.lower_bound_us \
                else None
            tab.add_row(t.task.name, str(t.records), _us(t.best_latency_us), _x(t.speedup("O3")),
                        _x(t.speedup("plan:")), f"{bound:.2f}" if bound else "-",
                        t.stopped or _state(job))
        if len(job.tasks) > 1 or job.tasks[0].task.weight > 1:
            for m in model_names([t.task for t in job.tasks]):
                tab.add_row(f"{m} (model)", "", _us(job.model_latency(m)), "", "", "", "")
        return tab


def summary_table(result: TuneResult) -> Any:
    """The final summary: each task's best, its ratios and latency over the lower bound."""
    from rich.table import Table

    tab = Table(title=f"tuned: {result.measured} new measurements ({result.total} in the log), "
                      f"{result.measurements_per_s:.1f}/s, {result.seconds:.0f} s",
                caption="xO3, xplan, xO0-3: speed-up of the best over O3, the guide's plan and "
                        "the best level; /bound: latency over the lower bound")
    for col in ("task", "n", "best µs", "by", "xO3", "xplan", "xO0-3", "/bound", "errors"):
        # fold, never cut: long task names (h_vit_mlp_3) stay whole at 80 columns and in pipes
        tab.add_column(col, justify="left" if col in ("task", "by", "errors") else "right",
                       overflow="fold")
    for t in result.tasks:
        errors = ", ".join(f"{k} {v}" for k, v in sorted(t.errors.items())) or "-"
        bound = f"{t.latency_over_bound:.2f}" if t.latency_over_bound else "-"
        tab.add_row(t.name, str(t.records), _us(t.best_latency_us), t.best_tuner or "-",
                    _x(t.speedup("O3")), _x(t.speedup("plan:")), _x(t.speedup("O")), bound, errors)
    if len(result.tasks) > 1 or result.tasks[0].weight > 1:
        for m in result.models:
            tab.add_row(f"{m.name} (model)", "", _us(m.best_us), "",
                        *(_x(base / m.best_us) if base and m.best_us else "-"
                          for base in (m.o3_us, m.plan_us, m.best_level_us)), "", "")
    return tab
