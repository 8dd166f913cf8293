"""Tables (CSV, Markdown) and plots (PNG) of a suite run, from its saved run files only.

Every ratio is taken within one model of one suite run: a method's speed-up is
the best baseline's latency (O0-O3 and the guide's plans, simulated in the same
run) over the method's best latency; "measurements to 95%" counts until the
method's best-so-far reaches 95% of the throughput of the best schedule any
method or baseline found for that model in this run.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench._tuning import reach

__all__ = ["COLUMNS", "Table", "build_table", "readme_block", "update_readme", "write_outputs"]

COLUMNS = (
    "model", "batch", "method", "measurements", "latency_us", "chip_throughput_per_s",
    "speedup_over_best_baseline", "speedup_over_plan", "best_baseline", "latency_over_bound",
    "lower_bound_us", "ddr_mb", "peak_l1_kib", "peak_llb_kib", "meas_to_95pct",
    "tuning_wall_s_this_machine", "status", "stopped",
)

BASELINE_ORDER = ("O0", "O1", "O2", "O3")


class Table:
    """Rows of the suite (one per model and method) and the per-model facts."""

    def __init__(self, rows: list[dict[str, Any]], models: list[dict[str, Any]],
                 curves: dict[tuple[str, str], list[float]], methods: Sequence[str]) -> None:
        self.rows = rows
        self.models = models
        self.curves = curves
        self.methods = tuple(methods)

    def row(self, model: str, method: str) -> dict[str, Any] | None:
        """The row of one model and method (None if it did not run)."""
        for r in self.rows:
            if r["model"] == model and r["method"] == method:
                return r
        return None


def _row(facts: dict[str, Any], method: str, m: dict[str, Any], **extra: Any) -> dict[str, Any]:
    ok = m.get("status") == "ok"
    return {
        "model": facts["model"], "label": facts["label"], "batch": facts["batch"], "method": method,
        "measurements": extra.get("measurements"),
        "latency_us": m["latency_us"] if ok else None,
        "chip_throughput_per_s": m["chip_throughput_per_s"] if ok else None,
        "latency_over_bound": m["latency_over_bound"] if ok else None,
        "lower_bound_us": m["lower_bound_us"] if ok else None,
        "ddr_mb": m["ddr_bytes"] / 1e6 if ok else None,
        "peak_l1_kib": m["peak_l1_bytes"] / 1024 if ok else None,
        "peak_llb_kib": m["peak_llb_bytes"] / 1024 if ok else None,
        "tuning_wall_s_this_machine": extra.get("wall_s"),
        "status": m.get("status", "none"),
        "stopped": extra.get("stopped"),
        "kind": extra.get("kind", "search"),
    }


def build_table(runs: Path, models: Sequence[str], methods: Sequence[str]) -> Table:
    """Read the run files of ``models`` x (baselines + ``methods``) and compute every ratio.

    A missing search run is a row with status ``not run``.

    Raises:
        FileNotFoundError: a model's baselines file is missing.
    """
    rows: list[dict[str, Any]] = []
    facts_all: list[dict[str, Any]] = []
    curves: dict[tuple[str, str], list[float]] = {}
    for key in models:
        base = json.loads((runs / f"{key}_baselines.json").read_text())
        facts = {k: base[k] for k in ("model", "label", "batch", "flops", "compulsory_ddr_bytes")}
        model_rows = []
        labels = [lb for lb in base["baselines"] if lb.startswith("plan:")] + list(BASELINE_ORDER)
        for label in labels:
            model_rows.append(_row(facts, label, base["baselines"][label], kind="baseline"))
        for method in methods:
            path = runs / f"{key}_{method}.json"
            if not path.exists():  # an interrupted suite (--report-only): shown as not run
                curves[(key, method)] = []
                model_rows.append(_row(facts, method, {"status": "not run"}, stopped=""))
                continue
            run = json.loads(path.read_text())
            curves[(key, method)] = run["curve"]
            stopped = run.get("stopped")
            if stopped is None and run["measurements"] < run["budget"]:
                stopped = "before the budget (reason not recorded)"
            model_rows.append(_row(facts, method, run["best"], measurements=run["measurements"],
                                   wall_s=run["wall_s"], stopped=stopped or ""))
        base_lat = [r["latency_us"] for r in model_rows if r["kind"] == "baseline" and r["latency_us"]]
        plan_lat = [r["latency_us"] for r in model_rows
                    if r["method"].startswith("plan:") and r["latency_us"]]
        best_base = min(base_lat)
        best_base_label = next(r["method"] for r in model_rows if r["latency_us"] == best_base)
        best_any = min(r["latency_us"] for r in model_rows if r["latency_us"])
        target = best_any / 0.95
        bound = current_bound_us(key)  # a run file holds the bound of its day's simulator
        for r in model_rows:
            lat = r["latency_us"]
            if lat:
                r["lower_bound_us"], r["latency_over_bound"] = bound, lat / bound
            r["best_baseline"] = best_base_label
            r["speedup_over_best_baseline"] = best_base / lat if lat else None
            r["speedup_over_plan"] = min(plan_lat) / lat if lat and plan_lat else None
            if r["kind"] == "search" and r["status"] != "not run":
                r["meas_to_95pct"] = reach(curves[(key, r["method"])], target)
            else:
                r["meas_to_95pct"] = None
        facts["best_baseline_us"] = best_base
        facts["best_baseline"] = best_base_label
        facts["best_us"] = best_any
        facts["plan_us"] = min(plan_lat) if plan_lat else None
        facts_all.append(facts)
        rows.extend(model_rows)
    return Table(rows, facts_all, curves, methods)


def current_bound_us(key: str) -> float:
    """The simulator's lower bound of a suite model now, in µs (depends only on the model,
    its batch and the target, so stored latencies are compared with today's bound)."""
    from bench._suite import _target, spec_of
    from sim import lower_bound

    spec = spec_of(key)
    return float(lower_bound(spec.graph(), spec.batch, _target()))


def _fmt(v: Any, spec: str) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    return format(v, spec)


def write_csv(table: Table, path: Path) -> None:
    """One row per model and method (baselines included), columns :data:`COLUMNS`."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in table.rows:
        w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in COLUMNS})
    _write(path, buf.getvalue())


def summary_markdown(table: Table) -> str:
    """One line per model: the best baseline, each method's speed-up and measurements to 95%."""
    ms = table.methods
    head = (["model", "best baseline (µs)", "plan ×"] + [f"{m} ×" for m in ms]
            + [f"{m} to 95%" for m in ms] + ["guided lat/bound"])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for f in table.models:
        cells = [f["label"], f"{f['best_baseline']} {f['best_baseline_us']:,.1f}"]
        plan = [r for r in table.rows if r["model"] == f["model"] and r["method"].startswith("plan:")]
        if not plan:
            cells.append("no plan")
        elif plan[0]["status"] != "ok":
            cells.append(f"{plan[0]['method'][5:]}: {plan[0]['status']}")
        else:
            cells.append(_fmt(plan[0]["speedup_over_best_baseline"], ".3f"))
        for m in ms:
            r = table.row(f["model"], m)
            cells.append("not run" if r and r["status"] == "not run"
                         else _fmt(r and r["speedup_over_best_baseline"], ".3f"))
        for m in ms:
            r = table.row(f["model"], m)
            n = r and r["meas_to_95pct"]
            if r is None or r["status"] == "not run":
                cells.append("not run")
            else:
                cells.append(str(n) if n else f">{r['measurements']}")
        g = table.row(f["model"], "guided")
        cells.append(_fmt(g and g["latency_over_bound"], ".2f"))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def full_markdown(table: Table) -> str:
    """Every row: baselines and methods with the schedule's figures."""
    head = ["model", "method", "meas.", "latency µs", "chip samples/s", "× best base", "× plan",
            "lat/bound", "DDR MB", "peak L1 KiB", "peak LLB KiB", "to 95%", "tuning s*"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in table.rows:
        if r["status"] != "ok":
            lines.append(f"| {r['label']} | {r['method']} | {_fmt(r['measurements'], 'd')} | "
                         f"{r['status']} |" + " - |" * (len(head) - 4))
            continue
        lines.append("| " + " | ".join([
            r["label"], r["method"], _fmt(r["measurements"], "d") + ("†" if r["stopped"] else ""),
            _fmt(r["latency_us"], ",.1f"),
            _fmt(r["chip_throughput_per_s"], ",.0f"), _fmt(r["speedup_over_best_baseline"], ".3f"),
            _fmt(r["speedup_over_plan"], ".3f"), _fmt(r["latency_over_bound"], ".2f"),
            _fmt(r["ddr_mb"], ",.1f"), _fmt(r["peak_l1_kib"], ",.0f"), _fmt(r["peak_llb_kib"], ",.0f"),
            _fmt(r["meas_to_95pct"], "d") if r["kind"] == "search" else "",
            _fmt(r["tuning_wall_s_this_machine"], ".0f")]) + " |")
    return "\n".join(lines) + "\n"


def evo_note(table: Table) -> str:
    """guided (budget) against the plain evolutionary baseline (2 x budget), when both ran.

    Issue 26's goal: the guided tuner >= 0.99x the baseline on every model, geomean >= 1.01x.
    """
    ratios = []
    for f in table.models:
        g, e = table.row(f["model"], "guided"), table.row(f["model"], "evo")
        if g and e and g["status"] == "ok" and e["status"] == "ok":
            ratios.append((f["label"], e["latency_us"] / g["latency_us"]))
    if not ratios:
        return ""
    geo = math.exp(sum(math.log(r) for _, r in ratios) / len(ratios))
    cells = ", ".join(f"{label} {r:.3f}" for label, r in ratios)
    return (f"guided (budget) over the plain (mu + lambda) evolutionary baseline "
            f"(`evo`, bench/evo.py, 2 x budget), evo latency / guided latency: {cells}; "
            f"min {min(r for _, r in ratios):.3f}, geomean {geo:.3f} (goal: min >= 0.99, "
            f"geomean >= 1.01).\n")


def _stopped_note(table: Table) -> str:
    why = [f"{r['label']} {r['method']}: {r['stopped']}" for r in table.rows if r["stopped"]]
    return " `†` the search stopped before its budget: " + "; ".join(why) + "." if why else ""


def _write(path: Path, text: str) -> None:
    from compiler.files import write_atomic

    write_atomic(path, text.encode())


def write_markdown(table: Table, path: Path, meta: dict[str, Any]) -> str:
    """The suite's Markdown report; returns the summary table (what the README shows)."""
    summary = summary_markdown(table)
    start = ("seeded with O0-O3 and the plans, as graphtune tune does" if meta["seeded"]
             else "from scratch")
    text = "\n".join([
        "# graphtune benchmark suite",
        "",
        f"Command: `{meta['command']}`  ",
        f"Date: {meta['date']}  ",
        f"Machine: {meta['machine']}  ",
        f"Load average (1 min) at start / end of this invocation: {meta['load_start']:.2f} / "
        f"{meta['load_end']:.2f}  ",
        f"Searches: {start}, seed {meta['seed']}, in-process (workers=0), {meta['jobs']} run(s) "
        "at a time.",
        "",
        timing_note(meta),
        "",
        "Ratios are within one model of this run: `×` is the best baseline's latency (O0-O3 and "
        "the guide's plans that fit, simulated in this run) over the method's best latency "
        "(= chip-throughput ratio, same batch); `to 95%` is the measurements a method needed "
        "until its best reached 95% of the throughput of the best schedule found for the "
        "model by anyone in this run (`>N`: not within the budget); `lat/bound` is latency "
        "over the simulator's roofline lower bound.",
        "",
        "## Summary",
        "",
        summary,
        evo_note(table),
        "## All rows",
        "",
        "`*` tuning wall time on this machine (absolute, not comparable across machines; "
        "runs in parallel share the cores)." + _stopped_note(table),
        "",
        full_markdown(table),
        "## Plots",
        "",
        "![best so far](curves.png)",
        "",
        "![speed-ups](speedup.png)",
        "",
        "![roofline](roofline.png)",
        "",
    ])
    _write(path, text)
    return summary


README_START, README_END = "<!-- suite:start -->", "<!-- suite:end -->"


def readme_block(meta: dict[str, Any]) -> str:
    """What the README shows of a suite run (between its markers): how, when, where, the table."""
    return "\n".join([
        README_START,
        f"Produced by `{meta['command']}` on {meta['date']}; machine: {meta['machine']}. "
        + timing_note(meta) + " Every row and the plots: `bench/results/suite/suite.md`.",
        "",
        meta["summary_markdown"].rstrip("\n"),
        README_END,
    ])


def timing_note(meta: dict[str, Any]) -> str:
    """How long the suite took and on how busy a machine (the figures say which invocation)."""
    parts = [f"Budget {meta['budget']} measurements per method and model."]
    if meta.get("reused"):
        parts.append(f"{meta['reused']} of {meta['runs']} runs were reused from an earlier "
                     f"invocation (`--resume`); this invocation took {meta['wall_s'] / 60:.0f} min.")
    else:
        parts.append(f"Suite wall time {meta['wall_s'] / 60:.0f} min on this machine.")
    cpu = f"{meta['cpu_s'] / 60:.1f} CPU-minutes"
    if meta.get("cpu_unrecorded"):
        cpu += f" ({meta['cpu_unrecorded']} runs did not record CPU time)"
    parts.append(f"The runs' own wall times sum to {meta['run_wall_s'] / 60:.0f} min; they used {cpu}.")
    if meta.get("run_load_max") is not None:
        parts.append(f"Load average (1 min) when runs ended: {meta['run_load_min']:.1f} to "
                     f"{meta['run_load_max']:.1f} (more than the cores: the machine was shared and "
                     "wall times are not this suite's alone)." if meta["run_load_max"] > 2.5 else
                     f"Load average (1 min) when runs ended: {meta['run_load_min']:.1f} to "
                     f"{meta['run_load_max']:.1f}.")
    if meta.get("not_run"):
        parts.append(f"Not run (the suite was stopped before them): {', '.join(meta['not_run'])}.")
    return " ".join(parts)


def update_readme(path: Path, meta: dict[str, Any]) -> None:
    """Replace the block between the README's suite markers with this run's."""
    text = path.read_text()
    start, end = text.find(README_START), text.find(README_END)
    if start < 0 or end < start:
        raise ValueError(f"{path} has no {README_START} ... {README_END} block")
    _write(path, text[:start] + readme_block(meta) + text[end + len(README_END):])


_COLORS = {"guided": "C3", "tpe": "C0", "nsga2": "C2", "gp": "C4", "random": "C7", "evo": "C1"}


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_curves(table: Table, path: Path) -> None:
    """Best-so-far speed-up over the best baseline vs measurements, one panel per model."""
    plt = _plt()
    n = len(table.models)
    cols = min(5, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.7 * rows), squeeze=False)
    for ax, f in zip(axes.flat, table.models, strict=False):
        for m in table.methods:
            c = table.curves[(f["model"], m)]
            if not c:
                continue
            ys = [f["best_baseline_us"] / v if math.isfinite(v) and v > 0 else float("nan") for v in c]
            ax.plot(range(1, len(ys) + 1), ys, label=m, color=_COLORS.get(m), linewidth=1.2)
        ax.axhline(1.0, color="black", linewidth=0.7, linestyle=":")
        ax.axhline(f["best_baseline_us"] / (f["best_us"] / 0.95), color="grey", linewidth=0.7,
                   linestyle="--")
        ax.set_title(f["label"], fontsize=9)
        # The first measurements (O0-O2) sit far below; the search happens near 1.
        top = f["best_baseline_us"] / f["best_us"]
        ax.set_ylim(0.9, max(1.02, top * 1.02))
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    axes[0][0].set_ylabel("best so far / best baseline (×)", fontsize=8)
    axes[-1][0].set_xlabel("measurements", fontsize=8)
    axes[0][0].legend(fontsize=7)
    fig.suptitle("Best-so-far throughput over the best of O0-O3 and the plan "
                 "(dashed: 95% of the best found; axis from 0.9)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_speedups(table: Table, path: Path) -> None:
    """Per-model bars: each method's speed-up over the best baseline (and the plan's)."""
    import numpy as np

    plt = _plt()
    labels = [f["label"] for f in table.models]
    series = ["plan", *table.methods]
    x = np.arange(len(labels))
    w = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(labels) + 2), 4.2))
    shown: list[float] = []
    for k, s in enumerate(series):
        vals = []
        for f in table.models:
            if s == "plan":
                r = next((r for r in table.rows if r["model"] == f["model"]
                          and r["method"].startswith("plan:")), None)
            else:
                r = table.row(f["model"], s)
            v = r["speedup_over_best_baseline"] if r else None
            vals.append(v if v else 0.0)
        shown += [v for v in vals if v]
        bars = ax.bar(x + (k - (len(series) - 1) / 2) * w, vals, w, label=s,
                      color=_COLORS.get(s, "C1"))
        ax.bar_label(bars, labels=[f"{v:.2f}" if v else "" for v in vals], fontsize=5,
                     rotation=90, padding=1)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(x)
    ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("× the best of O0-O3 and the plan (axis cut)")
    # Ratios sit near 1: the axis starts below the smallest bar shown, not at 0.
    ax.set_ylim(min(0.95, min(shown, default=1.0) * 0.97), max(shown, default=1.0) * 1.06)
    ax.legend(fontsize=8, ncol=len(series))
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_roofline(table: Table, path: Path) -> None:
    """Roofline of one cluster: each schedule at (FLOPs / DDR byte, FLOP/s), with the bound.

    Roofs from the target: DDR bandwidth, the matrix units' and the vector units'
    peak. Hollow markers are each model's lower bound (compulsory DDR traffic,
    bound latency); filled ones the tuned schedules and the best baseline.
    """
    import numpy as np

    from compiler.target import Target

    t = Target.default()
    clock = t.clock_hz
    cores = t.chip.cores_per_cluster
    mat = 2.0 * t.matrix.macs_per_cycle * cores * clock
    vec = float(t.vector.lanes * cores * clock)
    bw = t.ddr.bytes_per_cycle * clock
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 5.0))
    markers = {"baseline": "s", "guided": "o", "tpe": "^", "nsga2": "v", "gp": "D", "random": "x", "evo": "P"}
    xs = []
    for k, f in enumerate(table.models):
        color = f"C{k % 10}"
        lb = next((r["lower_bound_us"] for r in table.rows
                   if r["model"] == f["model"] and r["lower_bound_us"]), None)
        if lb:
            x0 = f["flops"] / f["compulsory_ddr_bytes"]
            ax.scatter([x0], [f["flops"] / (lb * 1e-6)], facecolors="none", edgecolors=color, s=60)
            xs.append(x0)
        pts = [("baseline", table.row(f["model"], f["best_baseline"]))]
        pts += [(m, table.row(f["model"], m)) for m in table.methods]
        for m, r in pts:
            if not r or not r["latency_us"]:
                continue
            x = f["flops"] / (r["ddr_mb"] * 1e6)
            xs.append(x)
            ax.scatter([x], [f["flops"] / (r["latency_us"] * 1e-6)], marker=markers.get(m, "o"),
                       color=color, s=30, label=f["label"] if m == "baseline" else None)
    lo, hi = (min(xs) / 3, max(xs) * 3) if xs else (0.1, 1e4)
    grid = np.geomspace(lo, hi, 200)
    ax.plot(grid, np.minimum(bw * grid, mat), color="black", linewidth=1, label="DDR / matrix roof")
    ax.plot(grid, np.minimum(bw * grid, vec), color="black", linewidth=1, linestyle="--",
            label="DDR / vector roof")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("FLOPs per DDR byte (schedule's DDR traffic)")
    ax.set_ylabel("FLOP/s of one cluster (FLOPs / latency)")
    ax.set_title("Where the schedules sit (filled: ■ best baseline, ● guided, ▲ tpe, ▼ nsga2, "
                 "× random; hollow: lower bound)", fontsize=8)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_outputs(table: Table, out: Path, meta: dict[str, Any]) -> dict[str, Path]:
    """suite.csv, suite.md, suite.json (the run's metadata) and the three PNGs in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {"csv": out / "suite.csv", "md": out / "suite.md", "meta": out / "suite.json",
             "curves": out / "curves.png", "speedup": out / "speedup.png",
             "roofline": out / "roofline.png"}
    write_csv(table, paths["csv"])
    summary = write_markdown(table, paths["md"], meta)
    _write(paths["meta"], json.dumps({**meta, "summary_markdown": summary}, indent=1))
    plot_curves(table, paths["curves"])
    plot_speedups(table, paths["speedup"])
    plot_roofline(table, paths["roofline"])
    return paths
