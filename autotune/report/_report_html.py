"""``graphtune report``'s page: one self-contained HTML file, plots embedded as PNG data URIs.

No script, stylesheet, font or image is fetched from anywhere: the page opens the
same offline. Every piece of text that comes from a log or a model (names, keys,
tuner labels, error messages, group and tensor names) is escaped. The markup is
also well-formed XML, so an XML parser reads it too.
"""

from __future__ import annotations

import base64
import datetime
import html
import io
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from autotune.report._report import BoundAnalysis, TaskLog

if TYPE_CHECKING:
    from compiler.graph import Graph
    from compiler.schedule import GraphSchedule
    from compiler.target import Target
    from sim import SimError, SimResult
    from sim._explain import Explanation

__all__ = ["TaskView", "render"]

_OP_TYPES_SHOWN = 4  # op types listed per group, most frequent first


@dataclass
class TaskView:
    """One task of the report: its log summary and, when known, its model and simulation.

    Attributes:
        log: The task's records.
        schedule: The best record's schedule, parsed (None without a valid record
            or when it does not parse).
        schedule_error: Why the best schedule could not be parsed ("" if it was).
        graph: The model graph (or NPU sub-function) with the task's workload key.
        model_source: Which ``--model`` matched, and which part of it.
        target: The hardware description whose hash is the task's target hash.
        sim: The best schedule simulated on ``graph`` and ``target``.
        sim_note: Why there is no simulation ("" when there is one).
        analysis: What bounds the simulated schedule.
        explanation: ``latency - bound`` in named terms, per group, with simulated
            edits (:func:`sim._explain.explain`).
    """

    log: TaskLog
    schedule: GraphSchedule | None = None
    schedule_error: str = ""
    graph: Graph | None = None
    model_source: str = ""
    target: Target | None = None
    sim: SimResult | SimError | None = None
    sim_note: str = ""
    analysis: BoundAnalysis | None = None
    explanation: Explanation | None = None

    @property
    def result(self) -> SimResult | None:
        """The simulation when it ran."""
        from sim import SimResult

        return self.sim if isinstance(self.sim, SimResult) else None


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def _mb(value: float) -> str:
    return f"{value / 1e6:,.2f} MB"


def _kib(value: float) -> str:
    return f"{value / 1024:,.0f} KiB"


def _pct(value: float) -> str:
    return f"{100 * value:.1f} %"


def _when(t: float) -> str:
    if not math.isfinite(t):
        return "-"
    return datetime.datetime.fromtimestamp(t, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _title(view: TaskView, index: int) -> str:
    w, t = view.log.workload, view.log.target
    return f"{index}. {w.model or '?'} batch {w.batch} on {t.chip}:{t.hash[:8]}"


# ---- page -----------------------------------------------------------------------------------
_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;margin:2em auto;
max-width:1200px;padding:0 1em;color:#222;line-height:1.4}
h1{font-size:1.6em}h2{font-size:1.3em;border-bottom:1px solid #ccc;margin-top:2em}
h3{font-size:1.05em;margin-top:1.4em}
table{border-collapse:collapse;margin:.5em 0;font-size:.9em}
th,td{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}
th{background:#f0f0f0}td.n{text-align:right;font-variant-numeric:tabular-nums}
code,.mono{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.9em}
.meta{color:#555}.note{background:#fff6d6;border:1px solid #e8d48b;padding:.4em .6em}
.verdict{background:#eef5ff;border:1px solid #9cbbe8;padding:.5em .7em}
.err{color:#a00}img{max-width:100%;height:auto}
details{margin:.5em 0}summary{cursor:pointer}
"""


def render(views: Sequence[TaskView], log_paths: Sequence[str], model_paths: Sequence[str],
           notes: Sequence[str], version: str) -> str:
    """The whole page.

    Args:
        views: The tasks, in order of first record.
        log_paths: The logs read (shown in the header).
        model_paths: The ``--model`` files given.
        notes: Warnings to show above the summary (skipped lines, unmatched models).
        version: graphtune's version, for the footer.
    """
    records = sum(v.log.count for v in views)
    now = datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8"/>\n',
        '<meta name="viewport" content="width=device-width, initial-scale=1"/>\n',
        f"<title>graphtune report: {_e(', '.join(log_paths))}</title>\n",
        f"<style>{_CSS}</style>\n</head>\n<body>\n",
        "<h1>graphtune tuning report</h1>\n",
        f'<p class="meta">Logs: {_e(", ".join(log_paths))}. '
        f"Models: {_e(', '.join(model_paths)) if model_paths else 'none given (--model)'}. "
        f"{records} record(s), {len(views)} task(s) (workload and target). Generated {now} "
        f"by graphtune {_e(version)}. Latencies are simulated, of one batch on one cluster; "
        "throughputs are the whole chip's, one stream per cluster.</p>\n",
    ]
    for note in notes:
        parts.append(f'<p class="note">{_e(note)}</p>\n')
    parts.append(_summary(views))
    from autotune.report._sweep import sweep_section

    parts.append(sweep_section([v.log for v in views]))
    for i, view in enumerate(views, start=1):
        parts.append(_task(view, i))
    parts.append("</body>\n</html>\n")
    return "".join(parts)


def _summary(views: Sequence[TaskView]) -> str:
    head = ("task", "records", "ok", "best µs", "chip samples/s", "best seed µs",
            "speed-up over seed", "to 95 %", "latency / floor", "bound by")
    rows = []
    for i, v in enumerate(views, start=1):
        log = v.log
        best = log.best
        base = log.best_baseline()
        best_us = best.result.latency_us if best is not None else None
        speedup = (f"{base[1] / best_us:.2f}x" if base is not None and best_us else "-")
        reach = log.to_reach(0.95)
        r = v.result
        ratio = f"{r.latency_over_bound:.2f}" if r is not None else "-"
        bound = v.analysis.limit if v.analysis is not None else "-"
        thr = best.result.throughput_per_s if best is not None else None
        rows.append(
            f'<tr><td><a href="#task-{i}">{_e(_title(v, i))}</a></td>'
            f'<td class="n">{log.count}</td><td class="n">{log.statuses.get("ok", 0)}</td>'
            f'<td class="n">{_us(best_us)}</td><td class="n">{_us(thr)}</td>'
            f'<td class="n">{_e(f"{base[0]} {base[1]:,.1f}") if base else "-"}</td>'
            f'<td class="n">{speedup}</td><td class="n">{reach if reach else "-"}</td>'
            f'<td class="n">{ratio}</td><td>{_e(bound)}</td></tr>\n'
        )
    header = "".join(f"<th>{_e(h)}</th>" for h in head)
    return (f"<h2>Summary</h2>\n<table>\n<tr>{header}</tr>\n{''.join(rows)}</table>\n"
            "<p class=\"meta\">Seeds are the records whose tuner is O0-O3 or a guide plan. "
            "“to 95 %”: measurements until the best so far is within 95 % of the final "
            "best's speed. The floor is the simulator's roofline lower bound.</p>\n")


def _task(view: TaskView, index: int) -> str:
    log = view.log
    w, t = log.workload, log.target
    shapes = ", ".join(f"{n} {'x'.join(str(d) for d in s)}" for n, s in w.input_shapes.items())
    statuses = ", ".join(f"{_e(s)} {n}" for s, n in sorted(log.statuses.items()))
    tuners = ", ".join(f"{_e(k or '(none)')} {n}" for k, n in log.tuners.most_common())
    out = [
        f'<section id="task-{index}">\n<h2>{_e(_title(view, index))}</h2>\n<table>\n',
        f"<tr><th>workload</th><td class=\"mono\">{_e(w.key)}</td></tr>\n",
        f"<tr><th>inputs</th><td>{_e(shapes) or '-'}</td></tr>\n",
        f"<tr><th>target</th><td class=\"mono\">{_e(t.chip)}:{_e(t.hash)}</td></tr>\n",
        f"<tr><th>records</th><td>{log.count} ({statuses})</td></tr>\n",
        f"<tr><th>tuners</th><td>{tuners}</td></tr>\n",
        f"<tr><th>measured</th><td>{_when(log.first_time_unix_s)} to "
        f"{_when(log.last_time_unix_s)}</td></tr>\n",
    ]
    if log.baselines:
        seeds = ", ".join(f"{_e(k)} {_us(v)} µs" if v is not None else f"{_e(k)} failed"
                          for k, v in sorted(log.baselines.items()))
        out.append(f"<tr><th>seeds</th><td>{seeds}</td></tr>\n")
    best = log.best
    if best is not None:
        who = best.prov.tuner or "?"
        trial = f", trial {best.prov.trial}" if best.prov.trial is not None else ""
        out.append(f"<tr><th>best</th><td>{_us(best.result.latency_us)} µs, "
                   f"{_us(best.result.throughput_per_s)} samples/s (chip), by {_e(who)}{trial}, "
                   f"{_when(best.prov.time_unix_s)}</td></tr>\n")
    out.append("</table>\n")
    for status, message in sorted(log.first_errors.items()):
        out.append(f'<p class="err">First {_e(status)} error: {_e(message) or "(no message)"}'
                   "</p>\n")
    out.append("<h3>Tuning curve</h3>\n")
    bound = view.result.lower_bound_us if view.result is not None else None
    out.append(_img(_curve_png(log, bound), f"tuning curve of task {index}"))
    out.append(_schedule_section(view))
    out.append(_sim_section(view))
    out.append("</section>\n")
    return "".join(out)


def _img(png: bytes | None, alt: str) -> str:
    if png is None:
        return '<p class="meta">(nothing to plot)</p>\n'
    data = base64.b64encode(png).decode("ascii")
    return f'<p><img alt="{_e(alt)}" src="data:image/png;base64,{data}"/></p>\n'


# ---- the schedule -------------------------------------------------------------------------
def _schedule_section(view: TaskView) -> str:
    from autotune.report._placements import bind_shape, chunk_summary

    out = ["<h3>Best schedule</h3>\n"]
    s = view.schedule
    if s is None:
        why = view.schedule_error or "no valid record: nothing ran"
        out.append(f'<p class="err">{_e(why)}</p>\n')
        return "".join(out)
    g = view.graph
    out.append(f"<p>batch {s.batch}, source {_e(s.source or '-')}, {len(s.groups)} group(s), "
               f"{len(s.transfers)} transfer(s), {len(s.order)} step(s)"
               + (f"; ops named from {_e(view.model_source)}" if g is not None else
                  "; give the model (--model) to name the ops") + ".</p>\n")
    timed = _group_times(view)
    head = ["group", "ops", "op types", "split", "samples/chunk", "mem_scope core_bind (per chunk)"]
    if timed:
        head += ["compute µs", "share of latency"]
    rows = []
    for grp in s.groups:
        ops, types = _ops_cells(grp.ops, g)
        samples = str(s.batch // grp.split) if grp.split and s.batch % grp.split == 0 else "?"
        cells = [f"<td>{_e(grp.name)}</td>", f"<td>{_e(ops)}</td>", f"<td>{_e(types)}</td>",
                 f'<td class="n">{grp.split}</td>', f'<td class="n">{samples}</td>',
                 f'<td class="mono">{_e(chunk_summary(grp.chunks))}</td>']
        if timed:
            us, share = timed.get(grp.name, (0.0, 0.0))
            cells += [f'<td class="n">{_us(us)}</td>', f'<td class="n">{_pct(share)}</td>']
        rows.append("<tr>" + "".join(cells) + "</tr>\n")
    out.append(_table(head, rows))
    if s.transfers:
        rows = [
            f"<tr><td>{_e(x.name)}</td><td>{_e(x.kind)}</td><td class=\"mono\">{_e(x.tensor)}"
            f"</td><td>{x.src_factor}-&gt;{x.dst_factor}</td><td>{_e(x.placement.mem_scope)}</td>"
            f'<td class="mono">{_e(bind_shape(x.placement))}</td></tr>\n'
            for x in s.transfers
        ]
        out.append("<details><summary>transfers</summary>\n"
                   + _table(["transfer", "kind", "tensor", "split", "mem_scope", "core_bind"], rows)
                   + "</details>\n")
    order = ", ".join(str(step) for step in s.order)
    out.append(f"<details><summary>execution order ({len(s.order)} steps)</summary>\n"
               f'<p class="mono">{_e(order)}</p>\n</details>\n')
    return "".join(out)


def _table(head: Sequence[str], rows: Sequence[str]) -> str:
    return ("<table>\n<tr>" + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr>\n"
            + "".join(rows) + "</table>\n")


def _ops_cells(ops: Sequence[int], graph: Graph | None) -> tuple[str, str]:
    if not ops:
        return "-", "-"
    if graph is None or ops[-1] >= len(graph.ops):
        span = f"ops {ops[0]}..{ops[-1]}" if len(ops) > 1 else f"op {ops[0]}"
        return f"{span} ({len(ops)})", "-"
    first, last = graph.ops[ops[0]].name, graph.ops[ops[-1]].name
    span = f"{first}..{last} ({len(ops)})" if len(ops) > 1 else f"{first} (1)"
    counts = Counter(graph.ops[i].op_type for i in ops).most_common()
    types = ", ".join(f"{t} {n}" for t, n in counts[:_OP_TYPES_SHOWN])
    if len(counts) > _OP_TYPES_SHOWN:
        types += f", +{len(counts) - _OP_TYPES_SHOWN} more"
    return span, types


def _group_times(view: TaskView) -> dict[str, tuple[float, float]]:
    """Group name -> (compute µs summed over its chunks, that over the latency)."""
    r = view.result
    if r is None:
        return {}
    total: dict[str, float] = {}
    for step in r.steps:
        if step.kind == "group":
            name = step.name.rsplit("[", 1)[0]
            total[name] = total.get(name, 0.0) + (step.end_cycles - step.start_cycles)
    to_us = 1e6 / r.clock_hz
    return {k: (v * to_us, v / (r.latency_cycles or 1.0)) for k, v in total.items()}


# ---- the simulation -----------------------------------------------------------------------
def _sim_section(view: TaskView) -> str:
    out = ["<h3>Simulation of the best schedule</h3>\n"]
    if view.sim is None:
        out.append(f'<p class="meta">{_e(view.sim_note or "not simulated")}</p>\n')
        return "".join(out)
    if not view.sim.ok:
        err: Any = view.sim
        out.append(f'<p class="err">The best record does not run on {_e(view.model_source)}: '
                   f"{_e(err.status)}: {_e(err.message)}</p>\n")
        return "".join(out)
    r = view.result
    assert r is not None and view.target is not None
    t = view.target
    a = view.analysis
    rows = [
        ("latency", f"{_us(r.latency_us)} µs ({r.latency_cycles:,.0f} cycles)"),
        ("throughput (one cluster)", f"{r.throughput_per_s:,.1f} samples/s"),
        (f"throughput (chip, {t.chip.clusters} streams)", f"{r.chip_throughput_per_s:,.1f} samples/s"),
        ("lower bound (floor)", f"{_us(r.lower_bound_us)} µs"),
        ("latency / lower bound", f"{r.latency_over_bound:.3f}"),
        ("peak L1 (fullest core)", f"{_kib(r.peak_l1_bytes)} of {_kib(t.l1.data_bytes)} "
                                   f"({_pct(r.peak_l1_bytes / t.l1.data_bytes)})"),
        ("peak LLB", f"{_kib(r.peak_llb_bytes)} of {_kib(t.llb.bytes)} "
                     f"({_pct(r.peak_llb_bytes / t.llb.bytes if t.llb.bytes else 0.0)})"),
        ("DDR traffic", f"{_mb(r.ddr_bytes)} (weights and gathers {_mb(r.weight_bytes_loaded)})"),
        ("NoC traffic", _mb(r.noc_bytes)),
        ("LLB traffic", _mb(r.llb_bytes)),
        ("steps", str(len(r.steps))),
    ]
    if view.log.best is not None and view.log.best.result.latency_us:
        logged = view.log.best.result.latency_us
        rows.append(("logged latency", f"{_us(logged)} µs (simulated now / logged = "
                                       f"{r.latency_us / logged:.3f})"))
    body = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>\n" for k, v in rows)
    out.append(f"<p>On {_e(view.model_source)}, target {_e(t.key)}.</p>\n"
               f"<table>\n{body}</table>\n")
    if a is not None:
        out.append("<h3>What bounds it</h3>\n")
        out.append(f'<p class="verdict">{_e(a.verdict)}</p>\n')
        floor_rows = [
            ("floor", f"{_us(a.floor_us)} µs, set by {a.floor} (host launch {_us(a.launch_us)} µs "
                      "included)"),
            ("DDR term", f"{_us(a.ddr_floor_us)} µs: {_mb(a.compulsory_ddr_bytes)} compulsory "
                         f"({_pct(a.compulsory_ddr_bytes / r.ddr_bytes if r.ddr_bytes else 0.0)}"
                         " of the DDR traffic moved)"),
            ("compute term", f"{_us(a.compute_floor_us)} µs" if a.compute_floor_us is not None
             else f"at most the DDR term ({_us(a.ddr_floor_us)} µs)"),
            ("L1 / LLB capacity used", f"{_pct(a.l1_fraction)} / {_pct(a.llb_fraction)}"),
        ]
        out.append("<table>\n" + "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>\n"
                                          for k, v in floor_rows) + "</table>\n")
        busy_rows = [f'<tr><td>{_e(name)}</td><td class="n">{_pct(frac)}</td></tr>\n'
                     for name, frac in a.resources]
        out.append(_table(["resource", "busy / latency"], busy_rows))
    if view.explanation is not None:
        out.append(_explain_section(view.explanation))
    out.append("<h3>Timeline</h3>\n")
    out.append(_img(_timeline_png(r), "timeline of the best schedule"))
    return "".join(out)


def _explain_section(x: Explanation) -> str:
    """``graphtune explain``'s tables: the gap in terms, per group, the edits (simulated)."""
    from sim._explain import TERMS

    out = [f"<h3>Where the {_us(x.gap_us)} µs above the bound go</h3>\n",
           '<p class="meta">From the simulator\'s own accounting; the terms add up to '
           "latency - bound (graphtune explain prints the same).</p>\n"]
    rows = [f'<tr><td>{_e(name)}</td><td class="n">{_us(x.terms_us.get(name, 0.0))}</td>'
            f"<td>{_e(what)}</td></tr>\n" for name, what in TERMS.items()]
    rows.append(f'<tr><th>total</th><td class="n">{_us(sum(x.terms_us.values()))}</td>'
                "<td>= latency - bound</td></tr>\n")
    out.append(_table(["term", "µs", "what"], rows))
    grows = []
    for g in x.groups:
        top = sorted(g.terms_us.items(), key=lambda kv: -abs(kv[1]))[:3]
        grows.append(f"<tr><td>{_e(g.group)}</td><td class=\"n\">{g.steps}</td>"
                     f"<td>{_e(g.engine)}</td><td class=\"n\">{_us(g.total_us)}</td><td>"
                     + _e(", ".join(f"{k} {v:,.1f}" for k, v in top)) + "</td></tr>\n")
    out.append(_table(["group", "steps", "bound by", "µs", "largest terms"], grows))
    if x.edits:
        erows = [f"<tr><td>{_e(e.description)}</td><td>{_e(e.attacks)}</td>"
                 f'<td class="n">{_us(e.latency_us)}</td><td class="n">{_us(e.gain_us)}</td>'
                 "</tr>\n" for e in x.edits]
        out.append(_table(["suggested edit", "attacks", "latency µs (simulated)", "gain µs"],
                          erows))
    return "".join(out)


# ---- plots --------------------------------------------------------------------------------
def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100)


def _png(fig: Any) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def _plain(text: str) -> str:
    """Matplotlib text shown as is: ``$`` would start mathtext (labels are user data)."""
    return text.replace("$", r"\$")


def _ticks(value: float, _pos: object = None) -> str:
    return f"{value:,.0f}" if value >= 10 else f"{value:.3g}"


def _minor_ticks(value: float, _pos: object = None) -> str:
    """Label the 2x and 5x minor ticks of a log axis (few decades: few major labels)."""
    lead = value / 10 ** math.floor(math.log10(value)) if value > 0 else 0.0
    return _ticks(value) if round(lead, 6) in (2.0, 5.0) else ""


def _curve_png(log: TaskLog, lower_bound_us: float | None) -> bytes | None:
    from matplotlib.ticker import FuncFormatter, NullFormatter

    if not log.latencies:
        return None
    fig = _figure(9.5, 3.4)
    ax = fig.add_subplot()
    xs = list(range(1, log.count + 1))
    ok = [(x, y) for x, y in zip(xs, log.latencies, strict=True) if y is not None]
    if ok:
        ax.scatter([x for x, _ in ok], [y for _, y in ok], s=9, color="tab:blue", alpha=0.3,
                   label="measured")
        best = log.best_so_far()
        bx = [x for x, y in zip(xs, best, strict=True) if y is not None]
        by = [y for y in best if y is not None]
        ax.step(bx, by, where="post", color="tab:blue", label="best so far")
    failed = [x for x, y in zip(xs, log.latencies, strict=True) if y is None]
    if failed:
        ax.scatter(failed, [0.97] * len(failed), marker="x", s=14, color="tab:red",
                   transform=ax.get_xaxis_transform(), label=f"failed ({len(failed)})")
    colors = ["tab:orange", "tab:green", "tab:purple", "tab:brown", "tab:pink", "tab:olive"]
    for (label, lat), color in zip(sorted(log.baselines.items()), colors * 10, strict=False):
        if lat is not None:
            ax.axhline(lat, color=color, linestyle="--", linewidth=1,
                       label=_plain(f"{label} {lat:,.1f} µs"))
    if lower_bound_us:
        ax.axhline(lower_bound_us, color="grey", linestyle=":", linewidth=1,
                   label=f"lower bound {lower_bound_us:,.1f} µs")
    values = [y for _, y in ok] + ([lower_bound_us] if lower_bound_us else [])
    if values and max(values) / min(values) > 20:
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(_ticks))
        few = math.log10(max(values) / min(values)) < 3
        ax.yaxis.set_minor_formatter(FuncFormatter(_minor_ticks) if few else NullFormatter())
    ax.set_xlabel("measurement (log order)")
    ax.set_ylabel("latency (µs)")
    ax.set_xlim(0.5, log.count + 0.5)
    ax.grid(alpha=0.3)
    if ok or failed:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return _png(fig)


def _timeline_png(r: SimResult) -> bytes | None:
    """The timeline with its legend and chunk boundaries (:mod:`._timeline`)."""
    from autotune.report._timeline import timeline_figure

    fig = timeline_figure(r)
    return None if fig is None else _png(fig)
