"""``graphtune space``: the search space of a model's graph schedules.

Lists the dimensions (kind, count, choices), the structure they come from
(segments between single-tensor cut points, anchors, repeated segments) and the
size (log10 of the number of parameter points, with and without ties), one
space per NPU sub-function. ``--json`` prints one JSON object.
"""

from __future__ import annotations

import json
from typing import Any

import click

from compiler.errors import GraphtuneError


class SpaceUsageError(GraphtuneError):
    """Options of ``graphtune space`` that cannot be used."""


def register(group: click.Group) -> None:
    """Attach this module's commands."""
    group.add_command(space_cmd)


@click.command("space")
@click.argument("model_path", metavar="MODEL.onnx|.pt2")
@click.option("--batch", type=int, default=None, help="Set the batch (default: the file's).")
@click.option("--target", "target_file", type=click.Path(dir_okay=False), default=None,
              help="Hardware TOML (default: the shipped STCP920).")
@click.option("--ties", is_flag=True, help="Repeated segments share their parameters.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of tables.")
def space_cmd(model_path: str, batch: int | None, target_file: str | None, ties: bool,
              as_json: bool) -> None:
    """List the search space of MODEL.onnx: dimensions, counts and size."""
    if batch is not None and batch < 1:
        raise SpaceUsageError(f"--batch must be >= 1, got {batch}")
    from autotune.commands._common import load_model, progress
    from compiler.target import Target
    from search_space import SpaceOptions, build_spaces

    target = Target.from_file(target_file) if target_file else Target.default()
    graph = load_model(model_path, batch).graph
    with progress("building the search space"):
        spaces = build_spaces(graph, target, options=SpaceOptions(ties=ties))
    described = [s.describe() for s in spaces]
    if as_json:
        click.echo(json.dumps({"model": graph.name, "batch": graph.batch,
                               "functions": described}))
        return
    for k, d in enumerate(described):
        _print(d, k, len(described))


def _print(d: dict[str, Any], k: int, n: int) -> None:
    from rich.table import Table

    from autotune.commands.model_cmds import console

    con = console()
    title = f"{d['model']} batch {d['batch']}" + (f", NPU function {k}" if n > 1 else "")
    head = Table(title=title, show_header=False)
    head.add_column("what")
    head.add_column("value", justify="right")
    head.add_row("ops", str(d["ops"]))
    head.add_row("segments (single-tensor cut points)", f"{d['segments']} ({d['cut_points']})")
    head.add_row("anchors / possible group starts", f"{d['anchors']} / {d['group_starts']}")
    head.add_row("repeated segment classes (segments)",
                 f"{d['repeated_segment_classes']} ({d['segments_in_repeats']})")
    head.add_row("parameters (vector length)", str(d["dimension"]))
    head.add_row("size, log10 points", f"{d['log10_size_untied']:.1f} untied, "
                 f"{d['log10_size_tied']:.1f} tied")
    con.print(head)
    table = Table(title="dimensions")
    table.add_column("kind")
    table.add_column("count", justify="right")
    table.add_column("choices")
    table.add_column("what")
    for kind, v in d["dimensions"].items():
        choices = ", ".join(str(c) for c in v["choices"])
        table.add_row(kind, str(v["count"]), choices if len(choices) < 60 else choices[:57] + "...",
                      v["help"])
    con.print(table)
