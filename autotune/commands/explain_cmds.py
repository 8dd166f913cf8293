"""``graphtune explain``: where a schedule's time above the lower bound goes, and what to change.

The terms come from :func:`sim._explain.explain` (the simulator's own accounting;
they add up to ``latency - bound``); the suggested edits are re-simulated, so the
latency printed for an edit is what simulating the edited schedule gives (``--json``
carries each edited schedule).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from compiler.errors import GraphtuneError, ScheduleError

if TYPE_CHECKING:
    from compiler.graph import Graph
    from compiler.target import Target
    from sim._explain import Explanation


class ExplainUsageError(GraphtuneError):
    """Options of ``graphtune explain`` that cannot be combined."""


def register(group: click.Group) -> None:
    """Attach this module's commands."""
    group.add_command(explain_cmd)


@click.command("explain")
@click.argument("model_path", metavar="MODEL.onnx")
@click.option("--schedule", "schedule_path", type=click.Path(dir_okay=False), default=None,
              help="A GraphSchedule JSON file.")
@click.option("--log", "log_path", type=click.Path(dir_okay=False), default=None,
              help="The best tuned schedule of this model in a tuning log.")
@click.option("--level", type=click.IntRange(0, 3), default=None,
              help="The automatic level O0-O3 instead.")
@click.option("--batch", type=int, default=None,
              help="Set the batch; default: the schedule's, else the file's.")
@click.option("--target", "target_file", type=click.Path(dir_okay=False), default=None,
              help="Hardware TOML (default: the shipped STCP920).")
@click.option("--edits", type=click.IntRange(0, 10), default=3, show_default=True,
              help="Suggested edits to simulate and show (0: none).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of tables.")
def explain_cmd(model_path: str, schedule_path: str | None, log_path: str | None,
                level: int | None, batch: int | None, target_file: str | None, edits: int,
                as_json: bool) -> None:
    """Split a schedule's latency above the lower bound into named terms.

    Per term and per group (granule padding, weights, matrix/vector serialisation,
    fill and drain, imbalance, streams after compute, waiting for loads, idle and
    unused cores, output store; the terms add up to latency - bound), the engine
    that bounds each group, and up to --edits schedule edits attacking the largest
    terms, each simulated. Example:

        graphtune explain r50.onnx --log tune.jsonl
    """
    if sum(x is not None for x in (schedule_path, log_path, level)) != 1:
        raise ExplainUsageError("give exactly one of --schedule S.json, --log LOG.jsonl or "
                                "--level N")
    if batch is not None and batch < 1:
        raise ExplainUsageError(f"--batch must be >= 1, got {batch}")
    from autotune.commands._common import load_model, progress
    from autotune.commands.schedule_cmds import _tuned, load_schedule
    from compiler.target import Target

    target = Target.from_file(target_file) if target_file else Target.default()
    schedule = load_schedule(schedule_path) if schedule_path is not None else None
    if schedule is not None:
        if batch is not None and schedule.batch != batch:
            raise ScheduleError(f"{schedule_path}: schedule is for batch {schedule.batch} "
                                f"but --batch is {batch}")
        batch = schedule.batch
    graph = load_model(model_path, batch).graph
    if log_path is not None:
        schedule = _tuned(log_path, graph, target)
        label = f"best of {log_path}"
    elif level is not None:
        from compiler.auto import graph_schedule_level

        schedule = graph_schedule_level(graph, target, level)
        label = f"O{level}"
    else:
        label = schedule_path or ""
    assert schedule is not None
    from sim import SimError, simulate
    from sim._explain import explain

    result = simulate(graph, schedule, target, timeline=False)
    if isinstance(result, SimError):
        raise ScheduleError(f"{label}: the schedule does not run ({result.status}): "
                            f"{result.message}")
    with progress("simulating the suggested edits"):
        expl = explain(graph, schedule, target, result, edits=edits)
    if as_json:
        out = expl.to_json()
        out.update({"model": graph.name, "batch": graph.batch, "schedule": label})
        click.echo(json.dumps(out))
    else:
        _print(expl, graph, target, label)


def _print(expl: Explanation, graph: Graph, target: Target, label: str) -> None:
    from rich.table import Table

    from autotune.commands._common import console
    from sim._explain import TERMS

    con = console()
    head = Table(title=f"{graph.name} batch {graph.batch}, schedule {label}: "
                       f"latency {expl.latency_us:,.1f} µs, bound {expl.bound_us:,.1f} µs, "
                       f"gap {expl.gap_us:,.1f} µs ({expl.latency_us / expl.bound_us:.3f}x)")
    head.add_column("term")
    head.add_column("µs", justify="right")
    head.add_column("of gap", justify="right")
    head.add_column("what")
    for name, what in TERMS.items():
        v = expl.terms_us.get(name, 0.0)
        share = f"{100 * v / expl.gap_us:.1f} %" if expl.gap_us > 0 else "-"
        head.add_row(name, f"{v:,.1f}", share, what)
    head.add_row("total", f"{sum(expl.terms_us.values()):,.1f}", "", "= latency - bound")
    con.print(head)
    groups = Table(title="per group (largest share first; the bounding engine of its steps)")
    groups.add_column("group")
    groups.add_column("steps", justify="right")
    groups.add_column("bound by")
    groups.add_column("µs", justify="right")
    groups.add_column("largest terms")
    for g in expl.groups:
        top = sorted(g.terms_us.items(), key=lambda kv: -abs(kv[1]))[:3]
        groups.add_row(g.group, str(g.steps), g.engine, f"{g.total_us:,.1f}",
                       ", ".join(f"{k} {v:,.1f}" for k, v in top))
    con.print(groups)
    if expl.edits:
        ed = Table(title="suggested edits (each simulated)")
        ed.add_column("edit")
        ed.add_column("attacks")
        ed.add_column("latency µs", justify="right")
        ed.add_column("gain µs", justify="right")
        for e in expl.edits:
            ed.add_row(e.description, e.attacks, f"{e.latency_us:,.1f}", f"{e.gain_us:,.1f}")
        con.print(ed)
