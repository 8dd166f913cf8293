"""``graphtune simulate``: simulate a schedule of a model on the STCP920 model.

Exit status: 0 when the schedule runs; 2 when it does not fit the model
(structure, batch) or for any other user error; 1 when it is well formed but
overflows L1 or the LLB. With ``--json`` one JSON object is printed in every
case where a simulation was attempted.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import click

from compiler.errors import GraphtuneError, ModelError, ScheduleError

if TYPE_CHECKING:
    from compiler.graph import Graph
    from compiler.schedule import GraphSchedule
    from compiler.target import Target
    from sim import SimError, SimResult

EXIT_INVALID = 2
EXIT_CAPACITY = 1


class SimUsageError(GraphtuneError):
    """Options of ``graphtune simulate`` that cannot be combined."""


def register(group: click.Group) -> None:
    """Attach this module's commands."""
    group.add_command(simulate_cmd)


@click.command("simulate")
@click.argument("model_path", metavar="MODEL.onnx|.pt2")
@click.option("--schedule", "schedule_path", type=click.Path(dir_okay=False), default=None,
              help="A GraphSchedule JSON file.")
@click.option("--level", type=click.IntRange(0, 3), default=None,
              help="Simulate the automatic level O0-O3 instead.")
@click.option("--batch", type=int, default=None,
              help="Set the batch (dim 0 of every input); default: the schedule's, else the file's.")
@click.option("--target", "target_file", type=click.Path(dir_okay=False), default=None,
              help="Hardware TOML (default: the shipped STCP920).")
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False), default=None,
              help="Write a Chrome/Perfetto trace (JSON) of the timeline.")
@click.option("--record", "record_path", type=click.Path(dir_okay=False), default=None,
              help="Append the result to a tuning log (JSON lines), so ApplyHistoryBest and "
                   "graphtune compile --log can use this schedule.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of tables.")
def simulate_cmd(
    model_path: str,
    schedule_path: str | None,
    level: int | None,
    batch: int | None,
    target_file: str | None,
    trace_path: str | None,
    record_path: str | None,
    as_json: bool,
) -> None:
    """Simulate one inference of MODEL.onnx under a schedule (--schedule S.json or --level N).

    Prints latency, throughput (one cluster and the chip, one stream per
    cluster), latency over the roofline bound, peak memory and resource use.
    Exit status: 0 the schedule runs, 1 it overflows L1 or the LLB, 2 it does not
    fit the model (or another user error).
    """
    if (schedule_path is None) == (level is None):
        raise SimUsageError("give exactly one of --schedule S.json or --level N")
    if batch is not None and batch < 1:
        raise SimUsageError(f"--batch must be >= 1, got {batch}")

    from autotune.commands._common import check_outputs, load_model
    from autotune.commands.schedule_cmds import load_schedule
    from compiler.target import Target

    check_outputs({"--trace": trace_path, "--record": record_path},
                  inputs=[model_path, schedule_path, target_file])

    target = Target.from_file(target_file) if target_file else Target.default()
    schedule = load_schedule(schedule_path) if schedule_path is not None else None
    if schedule is not None and batch is not None and schedule.batch != batch:
        _fail_invalid(
            f"{schedule_path}: schedule is for batch {schedule.batch} but --batch is {batch}",
            as_json,
        )
    from_schedule = batch is None and schedule is not None
    if batch is None and schedule is not None:
        batch = schedule.batch
    try:
        model = load_model(model_path, batch)
    except ModelError:
        if not from_schedule:
            raise
        assert schedule is not None
        # Most often the schedule is another model's: say so rather than TVM's reason.
        raise ScheduleError(
            f"{schedule_path}: this schedule is for workload {schedule.workload_key}, made for "
            f"batch {schedule.batch}, and {model_path} cannot be imported at batch "
            f"{schedule.batch}: make the schedule for this model (graphtune schedule make)"
        ) from None
    graph = model.graph
    if schedule is None:
        from compiler.auto import graph_schedule_level

        assert level is not None
        schedule = graph_schedule_level(graph, target, level)

    from sim import SimError, simulate

    result = simulate(graph, schedule, target, timeline=trace_path is not None)
    label = schedule.source or (schedule_path or f"O{level}")
    if record_path is not None:
        _append_record(record_path, graph, schedule, target, label)
    if isinstance(result, SimError):
        _report_error(result, schedule_path, as_json)
        return
    if trace_path is not None:
        _write_trace(result, trace_path, graph, schedule)
    if as_json:
        click.echo(json.dumps(_json(result, graph, label)))
    else:
        _print(result, graph, target, label, trace_path)


def _append_record(path: str, graph: Graph, schedule: GraphSchedule, target: Target,
                   label: str) -> None:
    """One record per run, appended and flushed (invalid and overflowing results too)."""
    from logs import RecordWriter
    from sim import measure

    m = measure(graph, [schedule], target)[0]
    tuner = "manual" if not label.startswith("O") else label
    with RecordWriter(path) as out:
        out.write(m.to_record(graph, schedule, target, tuner=tuner))


def _json(result: SimResult, graph: Graph, label: str) -> dict[str, Any]:
    out = result.to_json()
    out.update({"model": graph.name, "schedule": label, "reason": None})
    return out


def _fail_invalid(message: str, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(_error_json("invalid", message)))
        sys.exit(EXIT_INVALID)
    from compiler.errors import ScheduleError

    raise ScheduleError(message)


def _error_json(reason: str, message: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    base: dict[str, Any] = {
        "status": "invalid", "reason": "structure" if reason == "invalid" else reason,
        "latency_us": None, "throughput_per_s": None, "chip_throughput_per_s": None,
        "peak_l1_bytes": None, "peak_llb_bytes": None, "ddr_bytes": None, "noc_bytes": None,
        "lower_bound_us": None, "error": message,
    }
    if extra:
        base.update(extra)
    return base


def _report_error(err: SimError, schedule_path: str | None, as_json: bool) -> None:
    where = f"{schedule_path}: " if schedule_path and err.status == "invalid" else ""
    message = where + err.message
    code = EXIT_INVALID if err.status == "invalid" else EXIT_CAPACITY
    if as_json:
        extra = err.to_json()
        extra.pop("status", None)
        extra.pop("error", None)
        click.echo(json.dumps(_error_json(err.status, message, extra)))
        sys.exit(code)
    if err.status == "invalid":
        from compiler.errors import ScheduleError

        raise ScheduleError(message)
    if err.status == "invariant":
        click.echo(f"graphtune: simulator bug, result discarded: {message}", err=True)
    else:
        click.echo(f"graphtune: schedule does not fit: {message}", err=True)
    sys.exit(code)


def _write_trace(result: SimResult, path: str, graph: Graph, schedule: GraphSchedule) -> None:
    from compiler.files import write_atomic
    from sim import to_chrome_trace

    write_atomic(path, json.dumps(to_chrome_trace(result, graph, schedule)).encode())


def _print(result: SimResult, graph: Graph, target: Target, label: str,
           trace_path: str | None) -> None:
    from rich.table import Table

    from autotune.commands._common import console

    con = console()
    head = Table(title=f"{graph.name} batch {result.batch}, schedule {label}", show_header=False)
    head.add_column("what")
    head.add_column("value", justify="right")
    head.add_row("latency", f"{result.latency_us:,.1f} µs ({result.latency_cycles:,.0f} cycles)")
    head.add_row("throughput (1 cluster)", f"{result.throughput_per_s:,.0f} samples/s")
    head.add_row(f"throughput (chip, {target.chip.clusters} streams)",
                 f"{result.chip_throughput_per_s:,.0f} samples/s")
    head.add_row("lower bound", f"{result.lower_bound_us:,.1f} µs "
                 f"(latency / bound = {result.latency_over_bound:.2f})")
    head.add_row("peak L1 (one core)", f"{_kib(result.peak_l1_bytes)} of "
                 f"{_kib(target.l1.data_bytes)}")
    head.add_row("peak LLB", f"{_kib(result.peak_llb_bytes)} of {_kib(target.llb.bytes)}")
    head.add_row("DDR traffic", f"{result.ddr_bytes / 1e6:,.2f} MB "
                 f"(weights and gathers {result.weight_bytes_loaded / 1e6:,.2f} MB)")
    head.add_row("NoC traffic", f"{result.noc_bytes / 1e6:,.2f} MB")
    head.add_row("steps", str(len(result.steps)))
    for hs in result.host_segments:  # ops off the NPU (sim._host)
        head.add_row(f"host segment {hs.step}",
                     f"{', '.join(hs.ops)}: {target.cycles_to_us(hs.cycles):,.1f} µs "
                     f"({hs.pcie_bytes / 1e6:,.2f} MB over PCIe)")
    con.print(head)
    busy = result.busy_fraction()
    table = Table(title="busy time / latency")
    table.add_column("resource")
    table.add_column("busy", justify="right")
    for name, frac in _grouped(busy):
        table.add_row(name, f"{100 * frac:.1f} %")
    con.print(table)
    if trace_path:
        con.print(f"trace written to {trace_path} (open in ui.perfetto.dev or chrome://tracing)")


def _grouped(busy: dict[str, float]) -> list[tuple[str, float]]:
    """Cores averaged per engine, links summarised by the busiest, the rest as they are."""
    rows: list[tuple[str, float]] = []
    for engine in ("mme", "vme", "dma"):
        vals = [v for k, v in busy.items() if k.startswith("core") and k.endswith("." + engine)]
        if vals:
            rows.append((f"cores {engine.upper()} mean", sum(vals) / len(vals)))
            rows.append((f"cores {engine.upper()} max", max(vals)))
    for name in ("llb", "ddr"):
        if name in busy:
            rows.append((name.upper(), busy[name]))
    links = {k: v for k, v in busy.items() if k.startswith("noc")}
    if links:
        top = max(links, key=links.__getitem__)
        rows.append((f"NoC busiest link {top[4:]}", links[top]))
    return rows


def _kib(n: float) -> str:
    return f"{n / 1024:,.0f} KiB"
