"""``graphtune tune``: tune the graph schedules of models into a log.

Everything the user can get wrong (a model, the hardware file, the log path,
the storage, the sampler) is checked before any measurer (Ray) starts, and
fails with one line and exit status 2.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

import click

from compiler.errors import GraphtuneError


def register(group: click.Group) -> None:
    """Attach this module's commands."""
    group.add_command(tune_cmd)


@click.command("tune")
@click.argument("model_paths", metavar="MODEL.onnx [MORE.onnx ...]", nargs=-1, required=True)
@click.option("--trials", type=int, default=None,
              help="Measurements of these models the log should hold at the end (a re-run "
                   "resumes); optional with --time-budget, which then alone ends the job.")
@click.option("--time-budget", "time_budget", default=None, metavar="DURATION",
              help="Stop sending work after this much wall time from the start (20s, 10m, "
                   "1h30m); what is in flight finishes, the log and studies stay complete.")
@click.option("--log", "log_path", required=True, type=click.Path(),
              help="The tuning log (JSON lines; appended, created if missing).")
@click.option("--batch", type=int, default=None, help="Batch size of every model (default: the file's).")
@click.option("--workers", type=int, default=None,
              help="Worker processes on a local loopback Ray instance (default: one per CPU): "
                   "they breed the guided sampler's candidates and measure them; 0 does both "
                   "in this process.")
@click.option("--ray-address", default=None, help="Join this Ray cluster instead of starting one.")
@click.option("--storage", default=None,
              help="Shared study storage: postgresql://user@host/db (between hosts), another "
                   "Optuna URL, or a journal file; several tune jobs with their own logs may "
                   "share it (default: a journal next to the log, private to it).")
@click.option("--sampler", default="guided", show_default=True,
              type=click.Choice(["guided", "tpe", "gp", "nsga2", "random"]),
              help="Who proposes candidates: graphtune's cost-model-guided evolution or an "
                   "Optuna sampler.")
@click.option("--seed", type=int, default=None, help="Seed (with --workers 0: the same log twice).")
@click.option("--objective", default="latency", show_default=True,
              type=click.Choice(["latency", "throughput"]), help="What each task optimises.")
@click.option("--timeout-per-trial", type=float, default=None,
              help="Wall-time limit of one measurement, seconds.")
@click.option("--early-stopping", type=int, default=None,
              help="Stop a task after this many measurements without a gain.")
@click.option("--target", "target_file", type=click.Path(dir_okay=False), default=None,
              help="Hardware TOML (default: the shipped STCP920).")
@click.option("--measurer", "measurer_spec", default="sim", show_default=True,
              help="What measures: MODULE:CLASS (an autotune.Measurer subclass), or a name: sim, "
                   "delayed (the simulator at a board's pace, with failures) or an entry point "
                   "of the graphtune.measurers group.")
@click.option("--measurer-arg", "measurer_args", multiple=True, metavar="KEY=VALUE",
              help="Constructor option of the measurer (repeatable; VALUE is read as JSON when "
                   "it parses), e.g. --measurer-arg delay_s=0.2.")
@click.option("--worker-cpus", type=float, default=None,
              help="CPUs each Ray worker reserves (default: the measurer's, 1 for the simulator; "
                   "fractions allowed).")
@click.option("--worker-resource", "worker_resources", multiple=True, metavar="NAME=AMOUNT",
              help="A custom Ray resource each worker needs, e.g. stcp920=1: workers go only to "
                   "nodes started with it (repeatable).")
@click.option("--pretrained", is_flag=True,
              help="A task with no records on this target yet starts from the cost model "
                   "shipped with graphtune (cost_model/pretrained/) instead of the roofline "
                   "estimate; says so when it starts.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
def tune_cmd(model_paths: tuple[str, ...], trials: int | None, time_budget: str | None,
             log_path: str,
             batch: int | None,
             workers: int | None, ray_address: str | None, storage: str | None, sampler: str,
             seed: int | None, objective: str, timeout_per_trial: float | None,
             early_stopping: int | None, target_file: str | None, measurer_spec: str,
             measurer_args: tuple[str, ...], worker_cpus: float | None,
             worker_resources: tuple[str, ...], pretrained: bool, as_json: bool) -> None:
    """Tune MODEL.onnx (and more models) on the STCP920 simulator, recording every measurement.

    Each NPU sub-function of each model is a task with its own Optuna study;
    O0-O3 and the guide's plans are measured first. The log is the truth:
    re-running the same command resumes where it stopped. Writes the tuning
    curve next to the log (LOG.curve.png); studies go to LOG.journal unless
    --storage says otherwise (optuna-dashboard reads both). --measurer swaps the
    simulator for another Measurer (a board runner); --worker-resource keeps Ray
    workers on the nodes that have the board.
    """
    import time

    entered = time.monotonic()
    from autotune.commands._tune_front import (
        log_state,
        parse_duration,
        process_started,
        workers_warning,
    )

    started = process_started(entered)  # the budget counts from the command's start

    if trials is None and time_budget is None:
        raise GraphtuneError("give --trials N (the measurements the log should hold at the end), "
                             "--time-budget DURATION (e.g. 10m), or both")
    if trials is not None and trials < 1:
        raise GraphtuneError(f"--trials must be >= 1, got {trials}")
    budget_s = parse_duration(time_budget) if time_budget is not None else None
    from autotune.job._state import NO_TRIAL_LIMIT

    limit = f"--trials {trials}" if trials is not None else "no --trials"
    trials = NO_TRIAL_LIMIT if trials is None else trials
    # The first line, before TVM and Ray load: what is tuned into what, and what the log
    # holds. On a terminal only, as other progress: off one, a user error stays one line.
    from autotune.commands._common import _stderr_is_terminal

    tell = _stderr_is_terminal() and not as_json
    if tell:
        click.echo(f"graphtune: tune {' '.join(model_paths)} -> {log_path} "
                   f"({log_state(log_path)}); {limit}"
                   + (f", --time-budget {time_budget}" if time_budget else ""), err=True)
    if (warn := workers_warning(workers)) is not None:
        click.echo(f"graphtune: warning: {warn}", err=True)
    from autotune._tune import check_log_path
    from autotune.sampling._studies import check_sampler

    if batch is not None and batch < 1:
        raise GraphtuneError(f"--batch must be >= 1, got {batch}")
    if workers is not None and workers < 0:
        raise GraphtuneError(f"--workers must be >= 0, got {workers}")
    if early_stopping is not None and early_stopping < 1:
        raise GraphtuneError(f"--early-stopping must be >= 1, got {early_stopping}")
    check_sampler(sampler)
    if worker_cpus is not None and not 0 <= worker_cpus < math.inf:
        raise GraphtuneError(f"--worker-cpus must be a finite number >= 0, got {worker_cpus:g}")
    from autotune.measure._plugins import load_measurer, parse_key_values, parse_resources

    resources = parse_resources(worker_resources) or None
    measurer = load_measurer(measurer_spec, parse_key_values(measurer_args, "--measurer-arg"))
    from autotune.commands._common import check_outputs
    from autotune.commands._tune_front import summary_path_for
    from autotune.report._curve import curve_path_for

    check_outputs({"--log": log_path, "the tuning curve": curve_path_for(log_path),
                   "the job summary": summary_path_for(log_path)},
                  inputs=[*model_paths, target_file])
    check_log_path(log_path)
    if storage is not None:
        from autotune.running._journal import check_storage

        check_storage(storage, inputs=[*model_paths, target_file],
                      outputs=[("the tuning log", log_path),
                               ("the tuning curve", curve_path_for(log_path))])
    from compiler.target import Target

    target = Target.from_file(target_file) if target_file else Target.default()

    # A job that finished before (same model files, options and target) and whose log holds
    # --trials records of its tasks: its summary, without importing the models or Ray.
    from autotune.commands._tune_front import finished_summary, job_fingerprint

    fingerprint = job_fingerprint(list(model_paths), {
        "batch": batch, "objective": objective, "target_hash": target.hash,
        "measurer": measurer.name, "measurer_version": measurer.version})
    done = finished_summary(log_path, fingerprint, trials) if trials < NO_TRIAL_LIMIT else None
    if done is not None:
        count, saved = done
        click.echo(f"graphtune: the log already holds {count} records of these tasks "
                   f"(--trials {trials}): the job is finished, nothing was measured and Ray "
                   "was not started; its summary:", err=True)
        if as_json:
            click.echo(json.dumps(saved["json"]))
        else:
            click.echo(str(saved["text"]), nl=False)
        return

    from autotune.commands._common import load_model

    models = [load_model(p, batch) for p in model_paths]
    names = [m.name for m in models]
    for m, p in zip(models, model_paths):
        if names.count(m.name) > 1:
            raise GraphtuneError(f"two models are named {m.name!r} ({p}): rename one file")
    graphs = [m.graph for m in models]
    from autotune._tune import load_tasks

    tasks = load_tasks(graphs)
    for m in models if tell else ():
        n = sum(1 for t in tasks if t.count_in(m.name))
        click.echo(f"graphtune: {m.name}: batch {m.batch}, {len(m.graph.ops)} ops, "
                   f"{n} task{'s' if n != 1 else ''}", err=True)

    from autotune._options import MeasureOptions, RunOptions, SearchOptions
    from autotune._tune import tune
    from autotune.report._progress import ProgressTable, summary_table

    live = sys.stderr.isatty() and not as_json
    progress = ProgressTable(sys.stderr, live=live)
    try:
        result = tune(
            tasks, trials=trials, log=log_path, target=target,
            search=SearchOptions(sampler=sampler, seed=seed, objective=objective,
                                 early_stopping=early_stopping, pretrained=pretrained),
            run=RunOptions(workers=workers, storage=storage, ray_address=ray_address,
                           callbacks=[progress], worker_cpus=worker_cpus,
                           worker_resources=resources, time_budget_s=budget_s,
                           started=started,
                           notify=lambda line: click.echo(f"graphtune: {line}", err=True)),
            measure=MeasureOptions(measurer=measurer, timeout_per_trial=timeout_per_trial))
    finally:
        progress.close()
    if result.measured == 0 and result.total >= trials:
        click.echo(f"graphtune: the log already holds {result.total} records of these tasks "
                   f"(--trials {trials}): the job is finished, nothing was measured; raise "
                   "--trials to tune further", err=True)
    elif budget_s is not None and result.total < trials:
        of = f" of {trials}" if trials < NO_TRIAL_LIMIT else ""
        click.echo(f"graphtune: the time budget ({time_budget}) is used up: {result.total}{of} "
                   "measurements in the log; re-run to continue", err=True)
    finished = result.total >= trials
    if as_json:
        click.echo(json.dumps(result.to_json()))
        if finished:
            _save(log_path, fingerprint, tasks, result, trials)
        return
    from autotune.commands._common import console

    con = console()
    if finished:
        _save(log_path, fingerprint, tasks, result, trials)
    con.print(summary_table(result))
    for mr in result.models:  # the end-to-end figures, one plain line per model
        if not mr.best_us:
            continue
        ups = [f"{ref / mr.best_us:.3f}x over {name}" for ref, name in
               ((mr.o3_us, "O3"), (mr.plan_us, "the guide's plan"),
                (mr.best_level_us, "the best of O0-O3")) if ref]
        con.print(f"{mr.name}: {mr.best_us:,.1f} µs tuned; " + (", ".join(ups) or "no baseline"),
                  markup=False, highlight=False)
    con.print(f"log: {result.log}   studies: {result.storage}")
    if result.curve:
        con.print(f"tuning curve: {result.curve}")


def _save(log_path: str, fingerprint: dict[str, object], tasks: list[Any], result: Any,
          trials: int) -> None:
    """The finished job's summary, as the next identical run prints it (LOG.summary.json)."""
    import io

    from rich.console import Console

    from autotune.commands._tune_front import save_summary
    from autotune.report._progress import summary_table

    buf = io.StringIO()
    con = Console(file=buf, width=100, highlight=False)
    con.print(summary_table(result))
    for mr in result.models:
        if mr.best_us:
            con.print(f"{mr.name}: {mr.best_us:,.1f} µs tuned", markup=False)
    con.print(f"log: {result.log}   studies: {result.storage}", markup=False)
    save_summary(log_path, fingerprint, [t.key for t in tasks], buf.getvalue(), result.to_json())
