"""The report's section for sweep logs: one table per workload over the target variants.

A sweep names each variant ``<base>+key=value,...`` (:mod:`autotune.whatif._targets`),
so a log's targets with such names are a sweep's variants; the section lists,
per workload, each variant's swept values, records, best latency, O3, the
speed-up over O3 and the measurements until 95 % of the best, and plots the
best and O3 latencies over the variants.
"""

from __future__ import annotations

import html
import io
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from autotune.report._report import TaskLog

__all__ = ["sweep_section", "variant_values"]


def variant_values(chip: str) -> dict[str, str] | None:
    """``"STCP920+l1.data_bytes=512K,ddr.bytes_per_cycle=13"`` -> its values (None: not a variant)."""
    base, plus, rest = chip.partition("+")
    if not plus or not base:
        return None
    out: dict[str, str] = {}
    for part in rest.split(","):
        key, eq, value = part.partition("=")
        if not eq or not key or not value:
            return None
        out[key] = value
    return out


def sweep_section(tasks: Sequence[TaskLog]) -> str:
    """HTML of the sweep section ("" when no target of the log is a sweep variant)."""
    by: dict[str, list[tuple[TaskLog, dict[str, str]]]] = {}
    for t in tasks:
        values = variant_values(t.target.chip)
        if values is not None:
            by.setdefault(t.workload.key, []).append((t, values))
    if not by:
        return ""
    e = html.escape
    parts = ["<h2>Hardware sweep</h2>\n<p class=\"meta\">Targets named "
             "<code>base+key=value</code> are the variants of a <code>graphtune sweep</code>; "
             "its table.csv has the same figures per model with the lower bound and what bounds "
             "each variant.</p>\n"]
    for key, rows in by.items():
        keys = list(dict.fromkeys(k for _, v in rows for k in v))
        name = f"{rows[0][0].workload.model} b{rows[0][0].workload.batch}"
        head = ["variant", *keys, "records", "best µs", "O3 µs", "speed-up over O3", "to 95 %"]
        body = []
        for t, values in rows:
            best = t.best.result.latency_us if t.best is not None else None
            o3 = t.baselines.get("O3")
            up = f"{o3 / best:.2f}x" if o3 and best else "-"
            status = "" if best is not None else " (nothing ran)"
            cells = [e(t.target.chip) + status, *(e(values.get(k, "")) for k in keys), str(t.count),
                     f"{best:,.1f}" if best else "-", f"{o3:,.1f}" if o3 else "-", up,
                     str(t.to_reach(0.95) or "-")]
            body.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>\n")
        parts.append(f"<h3>{e(name)} <code>{e(key[:16])}</code></h3>\n<table>\n<tr>"
                     + "".join(f"<th>{e(h)}</th>" for h in head) + "</tr>\n" + "".join(body)
                     + "</table>\n")
        png = _plot(rows)
        if png:
            import base64

            data = base64.b64encode(png).decode("ascii")
            parts.append(f'<p><img alt="sweep of {e(name)}" src="data:image/png;base64,{data}"/></p>\n')
    return "".join(parts)


def _plot(rows: Sequence[tuple[TaskLog, dict[str, str]]]) -> bytes | None:
    ran = [(t, v) for t, v in rows if t.best is not None]
    if not ran:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(5.0, 0.8 * len(ran) + 2), 3.6))
    xs = range(len(ran))
    ax.bar([x - 0.2 for x in xs], [t.best.result.latency_us or 0.0 for t, _ in ran if t.best],
           width=0.4, label="tuned")
    ax.bar([x + 0.2 for x in xs], [t.baselines.get("O3") or 0.0 for t, _ in ran], width=0.4,
           label="O3")
    ax.set_xticks(list(xs), [",".join(v.values()) for _, v in ran], rotation=30, ha="right",
                  fontsize=7)
    ax.set_ylabel("latency (µs)")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return buf.getvalue()
