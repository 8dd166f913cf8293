"""``graphtune sweep``: tune models on variants of a chip (what-if of its parameters).

Every argument (the ``--set`` values against the target's bounds, the models,
the log and the output directory) is checked before anything is measured.
"""

from __future__ import annotations

import json

import click

from compiler.errors import GraphtuneError


def register(group: click.Group) -> None:
    """Attach this module's commands."""
    group.add_command(sweep_cmd)


@click.command("sweep")
@click.argument("model_paths", metavar="MODEL.onnx [MORE.onnx ...]", nargs=-1, required=True)
@click.option("--set", "sets", multiple=True, required=True, metavar="KEY=V1,V2,...",
              help="A target key and its values, e.g. l1.data_bytes=384K,512K,1M (K, M, G: "
                   "powers of 1024); repeatable: the variants are the cross product.")
@click.option("--zip", "zip_", is_flag=True,
              help="Pair the --set lists element by element instead of their cross product.")
@click.option("--base", "base_file", type=click.Path(dir_okay=False), default=None,
              help="Hardware TOML the variants change (default: the shipped STCP920).")
@click.option("--trials-per-variant", type=int, default=200, show_default=True,
              help="Measurements per variant on average (seeds included): each variant gets a "
                   "quarter first, the rest goes in chunks to the variants whose best still "
                   "improves (--allocate equal: exactly this many each).")
@click.option("--allocate", type=click.Choice(["adaptive", "equal"]), default="adaptive",
              show_default=True,
              help="How the sweep's measurements are spread over the variants.")
@click.option("--time-budget", type=float, default=None,
              help="Wall time of the whole sweep in seconds (each variant gets an equal share "
                   "of what is left; re-run to continue).")
@click.option("--seed", type=int, default=None, help="Seed of every tune.")
@click.option("--workers", type=int, default=None,
              help="Measurer processes (default: one per CPU; 0: in this process).")
@click.option("--batch", type=int, default=None, help="Batch size of every model (default: the file's).")
@click.option("--log", "log_path", required=True, type=click.Path(),
              help="The log of every variant (JSON lines; appended; re-run to resume).")
@click.option("-o", "--output", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Directory for table.csv, table.json, the plots and targets/<variant>.toml.")
@click.option("--cold", is_flag=True,
              help="No warm start: tune each variant from scratch (for comparison).")
@click.option("--json", "as_json", is_flag=True, help="Print the table as JSON.")
def sweep_cmd(model_paths: tuple[str, ...], sets: tuple[str, ...], zip_: bool,
              base_file: str | None, trials_per_variant: int, allocate: str,
              time_budget: float | None,
              seed: int | None, workers: int | None, batch: int | None, log_path: str,
              out_dir: str, cold: bool, as_json: bool) -> None:
    """Tune MODEL.onnx on each variant of a chip and tabulate what each design costs.

    Each variant is the base target with the --set keys changed, named after
    them (STCP920+l1.data_bytes=512K): its records carry that target key. Per
    variant O0-O3 and the guide's plans are measured, then a tune that starts
    from the variants finished before it (their best schedules and a cost model
    trained on their measurements). A variant on which nothing can fit is
    reported infeasible with the capacity reason. Example:

        graphtune sweep mbv2.onnx --set l1.data_bytes=384K,512K,1M --log s.jsonl -o sweep/
    """
    from pathlib import Path

    from autotune._tune import check_log_path
    from autotune.commands._common import check_outputs, load_model
    from autotune.whatif._targets import make_variants, parse_set
    from compiler.target import Target

    if trials_per_variant < 1:
        raise GraphtuneError(f"--trials-per-variant must be >= 1, got {trials_per_variant}")
    if time_budget is not None and not time_budget > 0:
        raise GraphtuneError(f"--time-budget must be > 0 seconds, got {time_budget:g}")
    if workers is not None and workers < 0:
        raise GraphtuneError(f"--workers must be >= 0, got {workers}")
    if batch is not None and batch < 1:
        raise GraphtuneError(f"--batch must be >= 1, got {batch}")
    base = Target.from_file(base_file) if base_file else Target.default()
    variants = make_variants(base, [parse_set(s) for s in sets], zip_)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise GraphtuneError(f"-o {out}: not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise GraphtuneError(f"-o {out}: cannot create the directory: {exc.strerror}") from None
    check_outputs({"--log": log_path, "-o table": str(out / "table.csv")},
                  inputs=[*model_paths, base_file])
    check_log_path(log_path)
    models = [load_model(p, batch) for p in model_paths]
    names = [m.name for m in models]
    for m, p in zip(models, model_paths):
        if names.count(m.name) > 1:
            raise GraphtuneError(f"two models are named {m.name!r} ({p}): rename one file")

    from autotune.whatif._sweep import sweep

    def say(line: str) -> None:
        click.echo(f"graphtune: {line}", err=True)

    def started(i: int, v: object, what: str) -> None:
        if what == "tuning":
            say(f"variant {i + 1}/{len(variants)}: {getattr(v, 'name', v)}")
        elif what == "more":
            say(f"variant {getattr(v, 'name', v)}: more measurements (its best still improves)")
        elif what == "cross":
            say(f"variant {getattr(v, 'name', v)}: the other variants' bests (cross-round)")

    result = sweep([m.graph for m in models], variants, trials_per_variant=trials_per_variant,
                   log=log_path, out=out, workers=workers, seed=seed, time_budget_s=time_budget,
                   warm=not cold, pretrained=not cold, notify=say,
                   on_variant=started, allocate=allocate)
    if as_json:
        click.echo(json.dumps({"measured": result.measured, "rows": [r.to_json() for r in result.rows],
                               "files": result.files}))
        return
    from rich.table import Table

    from autotune.commands._common import console

    t = Table(title=f"sweep of {base.name}: {len(variants)} variant(s), {result.measured} new "
                    "measurement(s)")
    for col in ("model", "variant", "best µs", "O3 µs", "× O3", "bound µs", "bounded by"):
        t.add_column(col, justify="right" if "µs" in col or "×" in col else "left")
    for r in result.rows:
        name = r.variant.partition("+")[2] or r.variant  # the swept values
        if r.status != "ok":
            t.add_row(r.model, name, r.status, "", "", "", r.reason.split(";")[0][:60])
            continue
        t.add_row(r.model, name, f"{r.best_us:,.1f}", f"{r.o3_us:,.1f}" if r.o3_us else "-",
                  f"{r.speedup_over_o3:.2f}" if r.speedup_over_o3 else "-",
                  f"{r.bound_us:,.1f}" if r.bound_us else "-", f"{r.floor}; {r.limit}")
    con = console()
    con.print(t)
    con.print(f"table: {out / 'table.csv'}  log: {log_path}", markup=False, highlight=False)
