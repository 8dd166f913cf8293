"""``graphtune report``: one self-contained HTML page about tuning logs, to send to a colleague.

Per task (workload and target in the logs): the tuning curve, the best schedule as
the guide's table and, when the model is given (``--model``, matched by workload
key, NPU sub-functions included), its simulation, timeline and what bounds it.
The values come from :mod:`autotune.report._report`, the page from :mod:`autotune.report._report_html`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from autotune.commands._common import check_outputs, load_model, progress, write_atomic
from compiler.errors import GraphtuneError

if TYPE_CHECKING:
    from autotune.report._report_html import TaskView
    from compiler.graph import Graph
    from compiler.target import Target


def register(group: click.Group) -> None:
    """Attach this module's commands."""
    group.add_command(report_cmd)


@click.command("report")
@click.argument("log_paths", nargs=-1, required=True, metavar="LOG.jsonl...")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="HTML file to write.")
@click.option("--model", "model_paths", multiple=True, metavar="MODEL.onnx|.pt2",
              help="A tuned model: simulate the best schedules of its tasks (repeatable).")
@click.option("--target", "target_files", multiple=True, type=click.Path(dir_okay=False),
              help="Hardware TOML of a tuned target (repeatable; the default STCP920 is known).")
def report_cmd(log_paths: tuple[str, ...], output: str, model_paths: tuple[str, ...],
               target_files: tuple[str, ...]) -> None:
    """Write a self-contained HTML report of tuning logs (no network needed to view it).

    Per task: the tuning curve, the best schedule as the guide's table and, with
    --model, its simulation (latency, throughput, latency / lower bound, peak
    L1/LLB, DDR and NoC traffic, busy fractions), its timeline and what bounds it.
    Example:

        graphtune report tune.jsonl -o report.html --model resnet50.onnx
    """
    from importlib import metadata

    from autotune.report._report import read_tasks
    from autotune.report._report_html import TaskView, render
    from compiler.target import Target

    inputs = [*log_paths, *model_paths, *target_files]
    check_outputs({"-o": output}, inputs=inputs)
    targets = {t.hash: t for t in [Target.default(), *(Target.from_file(f) for f in target_files)]}
    with progress(f"reading {', '.join(log_paths)}"):
        tasks, notes = read_tasks(log_paths)
    views = [TaskView(task) for task in tasks]
    for view in views:
        _parse_best(view)
    for path in model_paths:
        matched = _match_model(path, views, notes)
        if not matched:
            notes.append(f"{path} matches no task of the log (none of its workload keys at "
                         f"batch {', '.join(map(str, _batches(views)))} is in the log)")
    simulated = _simulate(views, targets)
    try:
        version = metadata.version("graphtune")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
        version = "(source)"
    with progress("drawing the report"):
        page = render(views, list(log_paths), list(model_paths), notes, version)
    data = page.encode("utf-8")
    write_atomic(output, data, inputs=inputs)
    for note in notes:
        click.echo(f"graphtune: warning: {note}", err=True)
    click.echo(f"{output}: {len(views)} task(s), {simulated} simulated, "
               f"{len(data) / 1024:,.0f} KiB")


def _batches(views: Sequence[TaskView]) -> list[int]:
    return sorted({v.log.workload.batch for v in views})


def _parse_best(view: TaskView) -> None:
    from compiler.schedule import GraphSchedule

    best = view.log.best
    if best is None:
        return
    try:
        view.schedule = GraphSchedule.from_json(dict(best.schedule))
    except (GraphtuneError, ValueError, TypeError, KeyError) as exc:
        view.schedule_error = f"the best record's schedule does not parse: {exc}"


def _parts(graph: Graph) -> list[tuple[Graph, str]]:
    """The graph and each NPU sub-function, as graphs with a description.

    The tuner keys a model whose ops all run on the NPU by the model's own graph,
    and a model with CPU ops by each sub-function's graph; both are offered.
    """
    out = [(graph, "the whole model")]
    runs = graph.npu_subfunctions()
    if len(runs) == 1 and len(runs[0]) == len(graph.ops):
        return out
    for i, ops in enumerate(runs):
        sub = graph.subgraph(ops, name=f"{graph.name}[{ops[0]}:{ops[-1]}]")
        first, last = graph.ops[ops[0]].name, graph.ops[ops[-1]].name
        out.append((sub, f"NPU sub-function {i} ({first}..{last}, {len(ops)} ops)"))
    return out


def _match_model(path: str, views: Sequence[TaskView], notes: list[str]) -> int:
    """Attach ``path``'s graphs to the tasks with their workload keys; returns the matches."""
    wanted = {v.log.workload.key for v in views if v.graph is None}
    if not wanted:
        return 0
    model = load_model(path)  # the file's own batch: failing here is the user's error
    own = model.graph.batch
    matched = 0
    # The batches this model was tuned at (records name their model); only when the log
    # names it nowhere, every batch of the log. A batch it cannot be imported at is worth
    # a warning only if the model then matches nothing: another model's batch is no news.
    named = sorted({v.log.workload.batch for v in views if v.log.workload.model == model.name})
    failures: list[str] = []
    for batch in named or _batches(views):
        if batch == own:
            graph = model.graph
        else:
            try:
                graph = load_model(path, batch).graph
            except GraphtuneError as exc:
                failures.append(f"{path} cannot be imported at batch {batch}: {exc}")
                continue
        for part, what in _parts(graph):
            for view in views:
                if view.graph is None and view.log.workload.key == part.workload_key:
                    view.graph = part
                    view.model_source = f"{path} at batch {batch}, {what}"
                    matched += 1
    if not matched:
        notes.extend(failures)
    return matched


def _simulate(views: Sequence[TaskView], targets: dict[str, Target]) -> int:
    from autotune.report._report import bound_analysis
    from sim import simulate
    from sim._explain import explain

    todo = [v for v in views if v.graph is not None]
    done = 0
    with progress("simulating the best schedules") as update:
        for i, view in enumerate(todo, start=1):
            assert view.graph is not None
            if view.schedule is None:
                view.sim_note = "no schedule to simulate (no valid record, or it does not parse)"
                continue
            target = targets.get(view.log.target.hash)
            if target is None:
                view.sim_note = (f"the log's target {view.log.target} is neither the default "
                                 "STCP920 nor a --target file: give its hardware file with "
                                 "--target to simulate")
                continue
            update(f"simulating task {i}/{len(todo)}")
            view.target = target
            view.sim = simulate(view.graph, view.schedule, target, timeline=False)
            if view.result is not None:
                view.analysis = bound_analysis(view.graph, view.result, target)
                view.explanation = explain(view.graph, view.schedule, target, view.result)
                done += 1
    for view in views:
        if view.graph is None and not view.sim_note:
            if view.schedule is not None:
                view.sim_note = "give the model with --model to simulate the best schedule"
            elif view.schedule_error:
                view.sim_note = "the best schedule does not parse: nothing to simulate"
            else:
                view.sim_note = "no valid record: nothing to simulate"
    return done
