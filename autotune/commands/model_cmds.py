"""``graphtune zoo`` and ``graphtune info``.

TVM and ONNX are imported inside the command bodies only, so ``--help`` and the
other commands start fast.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from autotune.commands._common import (
    check_outputs,
    console,
    load_model,
    progress,
    write_atomic,
)
from compiler.errors import GraphtuneError, ModelError

if TYPE_CHECKING:
    from compiler.model import Model


def register(group: click.Group) -> None:
    """Attach this module's commands."""
    group.add_command(zoo_cmd)
    group.add_command(info_cmd)


def _human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n:.2f} GiB"  # pragma: no cover


def _human_count(n: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.3f} {unit}"
    return f"{n:.0f}"


# ---- zoo -----------------------------------------------------------------------------------
def _parse_option(text: str, default: Any) -> tuple[str, Any]:
    if "=" not in text:
        raise ModelError(f"--option {text!r}: use key=value, e.g. --option image_size=64")
    key, raw = text.split("=", 1)
    key, raw = key.strip(), raw.strip()
    value: Any
    try:
        value = json.loads(raw)
    except ValueError:
        parts = [p.strip() for p in raw.strip("[]()").split(",") if p.strip()]
        try:
            value = [int(p) for p in parts]
        except ValueError:
            value = raw
        if isinstance(value, list) and len(value) == 1 and not isinstance(default, list):
            value = value[0]
    if isinstance(default, list) and isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    return key, value


@click.command("zoo")
@click.argument("name", required=False)
@click.option("-o", "--output", "output", type=click.Path(dir_okay=False), help="ONNX file to write.")
@click.option("--batch", type=int, default=1, show_default=True, help="Batch size (dim 0).")
@click.option("--seq", type=int, default=128, show_default=True,
              help="Sequence length (BERT and GPT; ignored by the others).")
@click.option(
    "--weights",
    type=click.Choice(["random", "zeros", "inputs"]),
    default="random",
    show_default=True,
    help="Weight values; 'inputs' makes large weights graph inputs (small files).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of random weights.")
@click.option("--option", "options", multiple=True, metavar="KEY=VALUE",
              help="Model option, e.g. image_size=64 or deep_layers=64,32 (repeatable).")
@click.option("--list", "list_", is_flag=True, help="List the zoo's models and options.")
def zoo_cmd(
    name: str | None,
    output: str | None,
    batch: int,
    seq: int,
    weights: str,
    seed: int,
    options: tuple[str, ...],
    list_: bool,
) -> None:
    """Build a model of the zoo as an ONNX file (or --list them)."""
    from compiler import zoo

    entries = {e.name: e for e in zoo.list_models()}
    if list_:
        from rich.table import Table

        table = Table(title="graphtune zoo")
        table.add_column("name", style="bold")
        table.add_column("description")
        table.add_column("options (defaults)")
        for e in entries.values():
            opts = ", ".join(f"{k}={json.dumps(v)}" for k, v in e.options.items())
            table.add_row(e.name, e.description, opts or "-")
        console().print(table)
        return
    if name is None:
        raise GraphtuneError("give a model NAME (see graphtune zoo --list)")
    if output is None:
        raise GraphtuneError("give the output file: graphtune zoo NAME -o FILE.onnx")
    check_outputs({"-o": output})
    defaults = entries[name].options if name in entries else {}
    parsed = dict(_parse_option(o, defaults.get(o.split("=", 1)[0].strip())) for o in options)
    with progress(f"building {name} ({weights} weights)") as status:
        proto = zoo.build(name, batch=batch, seq=seq, weights=weights, seed=seed, **parsed)
        status(f"writing {output}")
        data = proto.SerializeToString()
        write_atomic(output, data)
    click.echo(f"{output}: {_human_bytes(len(data))}, {len(proto.graph.node)} nodes")


# ---- info ----------------------------------------------------------------------------------
@click.command("info")
@click.argument("model_path", metavar="MODEL.onnx|.pt2")
@click.option("--batch", type=int, default=None, help="Set dim 0 of every data input.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def info_cmd(model_path: str, batch: int | None, as_json: bool) -> None:
    """Inputs, outputs, op counts, FLOPs, weights and NPU sub-functions of a model."""
    model = load_model(model_path, batch)
    g = model.graph
    summary = g.summary()
    summary["macs_per_sample"] = g.macs / g.batch
    # the ONNX file's names, as the table shows them (the Graph view uses Relax names)
    summary["inputs"] = _jsonable_info(model.get_input_info())
    summary["outputs"] = _jsonable_info(model.get_output_info())
    summary["import_path"] = getattr(model, "import_path", "") or "ONNX (relax.frontend.onnx.from_onnx)"
    if as_json:
        click.echo(json.dumps(summary, sort_keys=True))
        return
    _print_info(model, summary)


def _jsonable_info(info: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {n: {"shape": list(d["shape"]), "dtype": str(d["dtype"])} for n, d in info.items()}


def _print_info(model: Model, s: dict[str, Any]) -> None:
    from rich.table import Table

    out = console()
    out.print(f"[bold]{s['model']}[/bold]  batch {s['batch']}  {s['num_ops']} ops  "
              f"workload key {s['workload_key']}")
    out.print(f"imported through {s['import_path']}", markup=False)
    io = Table(title="inputs and outputs")
    for col in ("", "name", "shape", "dtype"):
        io.add_column(col)
    for kind, info in (("input", model.get_input_info()), ("output", model.get_output_info())):
        for n, d in info.items():
            io.add_row(kind, n, str(d["shape"]), d["dtype"])
    out.print(io)
    tot = Table(title="totals")
    tot.add_column("quantity")
    tot.add_column("whole batch", justify="right")
    tot.add_column("per sample", justify="right")
    tot.add_row("FLOPs", _human_count(s["flops"]), _human_count(s["flops_per_sample"]))
    tot.add_row("MACs", _human_count(s["macs"]), _human_count(s["macs_per_sample"]))
    int8 = any(t.kind == "weight" and t.dtype in ("int8", "uint8") for t in model.graph.tensors.values())
    tot.add_row("weights (INT8/FP16 on the NPU)" if int8 else "weights (FP16 on the NPU)",
                _human_bytes(s["weight_bytes"]), "")
    out.print(tot)
    ops = Table(title="ops by type")
    ops.add_column("type")
    ops.add_column("count", justify="right")
    for t, c in s["op_counts"].items():
        ops.add_row(t, str(c))
    out.print(ops)
    subs = Table(title="NPU sub-functions")
    for col in ("#", "ops", "first", "last"):
        subs.add_column(col)
    for sub in s["npu_subfunctions"]:
        subs.add_row(str(sub["index"]), str(sub["num_ops"]), sub["first_op"], sub["last_op"])
    out.print(subs)
    cpu = s["cpu_ops"]
    out.print(f"CPU ops: {', '.join(cpu) if cpu else 'none'}")
