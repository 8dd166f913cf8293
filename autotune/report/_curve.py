"""The tuning curve: best latency so far against measurements, one panel per task."""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from autotune.job._state import JobState

__all__ = ["curve_path_for", "draw_curve"]

_MAX_PANELS = 12  # the heaviest tasks; a model with more sub-functions gets the rest in the log


def curve_path_for(log_path: str) -> str:
    """``tune.jsonl`` -> ``tune.curve.png``."""
    root, ext = os.path.splitext(log_path)
    return (root if ext == ".jsonl" else log_path) + ".curve.png"


def draw_curve(job: JobState, path: str) -> str | None:
    """Draw the curve PNG (written atomically); None when no task has a measurement yet."""
    tasks = [t for t in job.tasks if t.curve]
    if not tasks:
        return None
    tasks.sort(key=lambda t: -(t.task.weight * (t.best_latency_us or 0.0)))
    tasks = tasks[:_MAX_PANELS]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(3, len(tasks))
    rows = math.ceil(len(tasks) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.6 * rows), squeeze=False)
    for ax, t in zip(axes.flat, tasks):
        xs = [x for x, _ in t.curve]
        ys = [y for _, y in t.curve]
        ax.step(xs, ys, where="post", color="tab:blue", label="tuned (best so far)")
        for prefix, style, name in (("O3", "tab:orange", "O3"), ("plan:", "tab:green", "guide plan")):
            base = t.baseline(prefix)
            if base is not None:
                ax.axhline(base, color=style, linestyle="--", linewidth=1, label=f"{name} {base:,.0f} µs")
        if t.lower_bound_us:
            ax.axhline(t.lower_bound_us, color="grey", linestyle=":", linewidth=1,
                       label=f"lower bound {t.lower_bound_us:,.0f} µs")
        # Zoom on the baselines: O0's first point would flatten everything that matters.
        bases = [v for v in (t.baseline("O3"), t.baseline("plan:")) if v]
        top = 1.25 * max(bases) if bases else max(ys) * 1.05
        ax.set_ylim(bottom=min(min(ys), t.lower_bound_us or min(ys)) * 0.95, top=top)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.set_title(f"{t.task.name} (batch {t.task.batch}, ×{t.task.weight})", fontsize=9)
        ax.set_xlabel("measurements")
        ax.set_ylabel("best latency (µs)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(tasks):]:
        ax.axis("off")
    fig.tight_layout()
    import io

    from compiler.files import write_atomic

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    write_atomic(path, buf.getvalue())
    return path
