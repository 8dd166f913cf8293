"""``graphtune distill`` and ``graphtune log show``: working with tuning-record files.

These commands import only :mod:`logs` (no TVM), so they start fast.
"""

from __future__ import annotations

import contextlib
import datetime
import sys
import warnings
from collections.abc import Iterator

import click
from rich.console import Console, JustifyMethod
from rich.table import Table

import logs
from logs import LogError

_KEY_CHARS = 12  # workload-key prefix shown in tables
_HASH_CHARS = 8  # target-hash prefix shown in tables


def register(group: click.Group) -> None:
    """Attach ``distill`` and the ``log`` group to ``group``."""
    group.add_command(distill_cmd)
    group.add_command(log_group)


@click.command("distill")
@click.option(
    "-i",
    "--input",
    "inputs",
    multiple=True,
    metavar="LOG",
    help="Input log; repeat it, or list more logs after it.",
)
@click.argument("more_inputs", nargs=-1, metavar="[LOG]...")
@click.option("-o", "--output", required=True, metavar="BEST.jsonl", help="Distilled log.")
@click.option(
    "--top",
    "top_k",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Records to keep per (workload, target).",
)
@click.option(
    "--per-target",
    is_flag=True,
    help="Inputs of several targets: one output per target (BEST.<chip>-<hash8>.jsonl).",
)
def distill_cmd(
    inputs: tuple[str, ...],
    more_inputs: tuple[str, ...],
    output: str,
    top_k: int,
    per_target: bool,
) -> None:
    """Keep the best valid records per (workload, target) of tuning logs.

    Inputs are log files, directories (their *.jsonl) or quoted glob patterns,
    e.g. the logs of every host of a farm. An existing OUTPUT is merged in,
    never overwritten; failed records are never kept. One output holds one
    target: inputs of several targets are refused unless --per-target writes
    one file per target. Prints, per workload, the records each input gave.
    Example:

        graphtune distill farm/ 'host*/tune.jsonl' -o best.jsonl --top 3
    """
    given = [*inputs, *more_inputs]
    if not given:
        raise LogError("no input logs: graphtune distill -i A.jsonl [B.jsonl ...] -o BEST.jsonl")
    paths = logs.expand_inputs(given, exclude=[output])
    with _reading() as progress:
        summary = logs.distill(
            paths, output, top_k, progress=progress, targets="split" if per_target else "one"
        )
    title = ", ".join(summary.outputs) or summary.output
    table = Table(title=f"distilled into {title} (top {top_k})")
    _add_columns(table, [("records", R), ("ok", R), ("kept", R), ("best µs", R), ("before µs", R)])
    for row in summary.rows:
        table.add_row(
            *_workload_cells(row.workload, row.target),
            str(row.records),
            str(row.valid),
            str(row.kept),
            _us(row.best_latency_us),
            _us(row.previous_best_latency_us),
            style=None if row.kept else "dim",
        )
    console = _console()
    console.print(table)
    _print_inputs(console, summary)
    merged = " (merged with its previous content)" if summary.merged_existing else ""
    empty = sum(1 for row in summary.rows if not row.kept)
    console.print(
        f"kept {summary.records_written} of {summary.records_read} record(s) for "
        f"{len(summary.rows) - empty} (workload, target) pair(s) in {title}{merged}"
        + (f"; {empty} pair(s) had no valid record" if empty else ""),
        highlight=False,
    )


def _print_inputs(console: Console, summary: logs.DistillSummary) -> None:
    """Per workload (and target): ``model key chip:hash: a.jsonl: 30, b.jsonl: 24``."""
    by_pair: dict[tuple[str, str, str], list[logs.InputRow]] = {}
    for row in summary.inputs:
        by_pair.setdefault((row.workload.key, row.target.chip, row.target.hash), []).append(row)
    console.print("records per input:", highlight=False)
    for rows in by_pair.values():
        w, t = rows[0].workload, rows[0].target
        counts = ", ".join(f"{r.path}: {r.records}" for r in rows)
        console.print(
            f"  {w.model or '?'} {w.key[:_KEY_CHARS]} {t.chip}:{t.hash[:_HASH_CHARS]}: {counts}",
            highlight=False,
            soft_wrap=True,
        )


@click.group("log")
def log_group() -> None:
    """Inspect tuning-record files."""


@log_group.command("show")
@click.argument("files", nargs=-1, required=True, metavar="LOG...")
@click.option("--top", type=click.IntRange(min=1), default=None, metavar="K",
              help="The K best records of each workload and target, best first.")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON array of records (fields as --csv).")
@click.option("--csv", "as_csv", is_flag=True,
              help="CSV, one row per record: task, workload, target, candidate, status, "
                   "latency_us, throughput_per_s, latency_over_bound, tuner, trial, time_utc, "
                   "error.")
def show_cmd(files: tuple[str, ...], top: int | None, as_json: bool, as_csv: bool) -> None:
    """Per workload and target: records, errors by status, best latency and when.

    With --top, --json or --csv: the records themselves (logs.to_dataframe gives
    the same rows to pandas).
    """
    if as_json and as_csv:
        raise LogError("--json and --csv cannot be combined: choose one")
    if top is not None or as_json or as_csv:
        _show_records(files, top, as_json, as_csv)
        return
    with _reading() as progress:
        db = logs.Database.load(files, top_k=1, progress=progress)
    table = Table(title=", ".join(files))
    _add_columns(
        table,
        [
            ("records", R),
            ("ok", R),
            ("errors", L),
            ("best µs", R),
            ("best at (UTC)", L),
            ("last at (UTC)", L),
        ],
    )
    for stats in db.all_stats():
        errors = ", ".join(f"{status.value} {n}" for status, n in stats.errors.items())
        table.add_row(
            *_workload_cells(stats.workload, stats.target),
            str(stats.count),
            str(stats.valid),
            errors or "-",
            _us(stats.best_latency_us),
            _when(stats.best_time_unix_s),
            _when(stats.last_time_unix_s),
        )
    console = _console()
    console.print(table)
    console.print(
        f"{len(db)} record(s), {len(db.workloads())} workload(s), "
        f"{len(db.keys())} (workload, target) pair(s)",
        highlight=False,
    )


def _show_records(files: tuple[str, ...], top: int | None, as_json: bool, as_csv: bool) -> None:
    import csv
    import json

    from logs._table import ROW_FIELDS, rows

    with _reading():
        table = list(rows(files, top))
    if as_csv:
        out = csv.DictWriter(sys.stdout, fieldnames=ROW_FIELDS, lineterminator="\n")
        out.writeheader()
        out.writerows({k: "" if v is None else v for k, v in r.items()} for r in table)
        return
    if as_json:
        click.echo(json.dumps(table, indent=1))
        return
    t = Table(title=f"{', '.join(files)}: top {top} per workload and target")
    for name, justify in [("task", L), ("workload", L), ("target", L), ("candidate", L),
                          ("latency µs", R), ("/ bound", R), ("tuner", L), ("trial", R),
                          ("time (UTC)", L)]:
        t.add_column(name, justify=justify, overflow="fold")
    for r in table:
        ratio = r["latency_over_bound"]
        t.add_row(r["task"], r["workload"][:_KEY_CHARS], r["target"].split(":")[0] + ":"
                  + r["target"].split(":")[-1][:_HASH_CHARS], r["candidate"],
                  _us(r["latency_us"]), "-" if ratio is None else f"{ratio:.2f}", r["tuner"],
                  "-" if r["trial"] is None else str(r["trial"]), r["time_utc"])
    console = _console()
    console.print(t)
    console.print(f"{len(table)} record(s)", highlight=False)


L: JustifyMethod = "left"
R: JustifyMethod = "right"
_WORKLOAD_COLUMNS = [("model", L), ("inputs", L), ("batch", R), ("workload", L), ("target", L)]


def _add_columns(table: Table, columns: list[tuple[str, JustifyMethod]]) -> None:
    for name, justify in [*_WORKLOAD_COLUMNS, *columns]:
        table.add_column(name, justify=justify)


def _workload_cells(workload: logs.WorkloadInfo, target: logs.TargetKey) -> list[str]:
    shapes = " ".join(
        f"{name}={'x'.join(str(d) for d in shape)}" for name, shape in workload.input_shapes.items()
    )
    return [
        workload.model or "?",
        shapes,
        str(workload.batch),
        workload.key[:_KEY_CHARS],
        f"{target.chip}:{target.hash[:_HASH_CHARS]}",
    ]


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def _when(time_s: float | None) -> str:
    if time_s is None:
        return "-"
    return datetime.datetime.fromtimestamp(time_s, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _console() -> Console:
    # Off a terminal (pipes, CI, tests) rich would wrap at 80 columns.
    return Console(width=None if sys.stdout.isatty() else 200)


@contextlib.contextmanager
def _reading() -> Iterator[logs.Progress | None]:
    """Show a progress bar on a terminal; print log warnings as ``graphtune: warning:`` lines."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", logs.LogWarning)
        try:
            if sys.stderr.isatty():
                from rich.progress import Progress

                with Progress(console=Console(stderr=True), transient=True) as bar:
                    task = bar.add_task("reading logs", total=None)

                    def update(done: int, total: int) -> None:
                        bar.update(task, completed=done, total=total)

                    yield update
            else:
                yield None
        finally:
            for w in caught:
                if issubclass(w.category, logs.LogWarning):
                    click.echo(f"graphtune: warning: {w.message}", err=True)
                else:
                    warnings.showwarning(w.message, w.category, w.filename, w.lineno)
