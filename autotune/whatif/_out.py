"""A sweep's files: ``table.csv``, ``table.json``, a plot per swept key, a Pareto plot.

* ``table.csv`` / ``table.json``: one row per model and variant (see
  :class:`autotune.whatif.SweepRow`); the CSV has one column per swept key.
* ``<key>.png`` (``l1.data_bytes.png``): latency against that key, tuned, O3 and the
  lower bound, one line per model and value of the other keys; infeasible variants
  are marked on the axis.
* ``pareto.png`` when two keys are swept: tuned latency over the grid of the two
  keys, the variants no other variant beats on both keys and latency circled
  (smaller key values taken as cheaper hardware).
* ``targets/<variant>.toml``: each variant's hardware file, for
  ``graphtune compile --log LOG --target targets/<variant>.toml``.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from autotune.whatif._rows import SweepResult, SweepRow
    from autotune.whatif._targets import Variant

__all__ = ["pareto_front", "table_csv", "write_outputs"]

COLUMNS = ["model", "variant", "status", "best_us", "throughput_per_s", "bound_us", "floor",
           "limit", "o3_us", "speedup_over_o3", "measurements", "reason", "target_key"]


def table_csv(rows: Sequence[SweepRow], keys: Sequence[str]) -> str:
    """The table as CSV text: model, variant, one column per swept key, then the figures."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([*COLUMNS[:2], *keys, *COLUMNS[2:]])
    for r in rows:
        d = r.to_json()
        cells = [d[c] for c in COLUMNS]
        w.writerow([*cells[:2], *(r.values.get(k, "") for k in keys),
                    *(_cell(c) for c in cells[2:])])
    return buf.getvalue()


def _cell(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.6g}"
    return v


def write_outputs(out: Path, result: SweepResult, variants: Sequence[Variant]) -> list[str]:
    """Write the table, the plots and the variants' hardware files; returns the paths."""
    from autotune.whatif._targets import write_variant_targets
    from compiler.files import write_atomic

    out.mkdir(parents=True, exist_ok=True)
    files: list[str] = []
    p = out / "table.csv"
    write_atomic(p, table_csv(result.rows, result.keys).encode())
    files.append(os.fspath(p))
    p = out / "table.json"
    doc = {"keys": result.keys, "rows": [r.to_json() for r in result.rows]}
    write_atomic(p, (json.dumps(doc, indent=1) + "\n").encode())
    files.append(os.fspath(p))
    for key in result.keys:
        png = _param_plot(result.rows, key, [k for k in result.keys if k != key])
        if png is not None:
            p = out / f"{key}.png"
            write_atomic(p, png)
            files.append(os.fspath(p))
    if len(result.keys) == 2:
        png = _pareto_plot(result.rows, result.keys)
        if png is not None:
            p = out / "pareto.png"
            write_atomic(p, png)
            files.append(os.fspath(p))
    files.extend(write_variant_targets(out, variants))
    return files


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(fig: Any) -> bytes:
    plt = _plt()
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()


def _param_plot(rows: Sequence[SweepRow], key: str, others: Sequence[str]) -> bytes | None:
    """Latency against ``key``: tuned (solid), O3 (dashed), bound (dotted), per line."""
    if not rows:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    lines: dict[tuple[str, tuple[Any, ...]], list[SweepRow]] = {}
    for r in rows:
        lines.setdefault((r.model, tuple(r.values.get(k) for k in others)), []).append(r)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    drawn = False
    for n, ((model, rest), rs) in enumerate(lines.items()):
        rs = sorted(rs, key=lambda r: r.values[key])
        c = colors[n % len(colors)]
        label = model + ("" if not others else " " + ", ".join(
            f"{k}={v:g}" if isinstance(v, float | int) else f"{k}={v}" for k, v in zip(others, rest)))
        ok = [r for r in rs if r.status == "ok"]
        if ok:
            drawn = True
            x = [r.values[key] for r in ok]
            ax.plot(x, [r.best_us for r in ok], "o-", color=c, label=f"{label}: tuned")
            o3 = [(r.values[key], r.o3_us) for r in ok if r.o3_us]
            if o3:
                ax.plot(*zip(*o3), "s--", color=c, alpha=0.7, label=f"{label}: O3")
            ax.plot(x, [r.bound_us for r in ok], ":", color=c, alpha=0.7, label=f"{label}: bound")
        bad = [r.values[key] for r in rs if r.status == "infeasible"]
        if bad:
            drawn = True
            ax.plot(bad, [0.0] * len(bad), "x", color=c, markersize=10, clip_on=False,
                    label=f"{label}: infeasible")
    if not drawn:
        plt.close(fig)
        return None
    if key.endswith("bytes"):
        xs = sorted({r.values[key] for r in rows})
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs, [_size(x) for x in xs])
        ax.minorticks_off()
    ax.set_xlabel(key)
    ax.set_ylabel("latency of one inference (µs)")
    ax.set_ylim(bottom=0)
    ax.set_title(f"latency vs {key}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return _png(fig)


def _size(n: float) -> str:
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{int(n // scale)}{unit}"
        if n >= scale and n % (scale // 4) == 0:
            return f"{n / scale:g}{unit}"
    return f"{n:g}"


def pareto_front(rows: Sequence[SweepRow], keys: Sequence[str]) -> list[SweepRow]:
    """Feasible rows that no other row of the same model beats (<= on both keys and latency)."""
    ok = [r for r in rows if r.status == "ok" and r.best_us]
    front = []
    for r in ok:
        dominated = any(
            o is not r and o.model == r.model
            and all(o.values[k] <= r.values[k] for k in keys)
            and (o.best_us or 0.0) <= (r.best_us or 0.0)
            and (any(o.values[k] < r.values[k] for k in keys) or (o.best_us or 0.0) < (r.best_us or 0.0))
            for o in ok)
        if not dominated:
            front.append(r)
    return front


def _pareto_plot(rows: Sequence[SweepRow], keys: Sequence[str]) -> bytes | None:
    ok = [r for r in rows if r.status == "ok" and r.best_us]
    if not ok:
        return None
    plt = _plt()
    models = list(dict.fromkeys(r.model for r in ok))
    fig, axes = plt.subplots(1, len(models), figsize=(5.6 * len(models), 4.4), squeeze=False)
    front = {id(r) for r in pareto_front(rows, keys)}
    for ax, model in zip(axes.flat, models):
        rs = [r for r in ok if r.model == model]
        x = [r.values[keys[0]] for r in rs]
        y = [r.values[keys[1]] for r in rs]
        lat = [r.best_us for r in rs]
        sc = ax.scatter(x, y, c=lat, s=120, cmap="viridis_r")
        for r, xi, yi in zip(rs, x, y):
            ax.annotate(f"{r.best_us:,.0f}", (xi, yi), textcoords="offset points", xytext=(0, 9),
                        ha="center", fontsize=7)
            if id(r) in front:
                ax.scatter([xi], [yi], s=300, facecolors="none", edgecolors="red")
        fig.colorbar(sc, ax=ax, label="tuned latency (µs)")
        ax.set_xlabel(keys[0])
        ax.set_ylabel(keys[1])
        ax.set_title(f"{model}: Pareto front circled")
        ax.grid(alpha=0.3)
    return _png(fig)
