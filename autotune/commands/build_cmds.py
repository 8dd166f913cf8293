"""``graphtune compile`` and ``graphtune run``.

``compile`` turns an ONNX file into a ``.stcobj`` artifact with a schedule from
a file (``--schedule``), an automatic level (``--level``) or the best tuned
record of a log (``--log``); ``run`` executes an artifact on the host CPU.
TVM is imported inside the command bodies only.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from autotune.commands._common import (
    check_outputs,
    last_line,
    load_model,
    progress,
    write_atomic,
)
from compiler.errors import CompileError, GraphtuneError, ScheduleError
from logs import LogError

if TYPE_CHECKING:
    import numpy as np

    from compiler.artifact import ArtifactMeta, TensorInfo
    from compiler.schedule import GraphSchedule


class UsageError(GraphtuneError):
    """Options that cannot be combined, or a malformed option value."""


def register(group: click.Group) -> None:
    """Attach this module's commands."""
    group.add_command(compile_cmd)
    group.add_command(run_cmd)


# ---- compile ---------------------------------------------------------------------------------
@click.command("compile")
@click.argument("model_path", metavar="MODEL.onnx|.pt2", type=click.Path(dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Artifact to write (default: MODEL.stcobj in the current directory).")
@click.option("--schedule", "schedule_path", type=click.Path(dir_okay=False),
              help="A GraphSchedule JSON file to apply.")
@click.option("--level", type=int, default=None,
              help="Automatic graph-schedule level 0-3 (default 3).")
@click.option("--log", "log_path", type=click.Path(dir_okay=False),
              help="Compile with the best tuned schedule of this log (ApplyHistoryBest).")
@click.option("--strict", is_flag=True,
              help="With --log: a model the log has no schedule for is an error, not O3.")
@click.option("--batch", type=int, default=None, help="Set the batch (dim 0 of every input).")
@click.option("--target", "target_path", type=click.Path(dir_okay=False),
              help="Hardware description TOML (default: the shipped STCP920).")
@click.option("--quant", "calib", type=click.Path(dir_okay=False),
              help="Quantize to INT8 first, calibrating on this .npz (one array per input).")
@click.option("--calibrate", type=click.Choice(["percentile", "kl_divergence"]), default=None,
              help="With --quant: activation calibration (default percentile).")
@click.option("--preset-scales", "preset_path", type=click.Path(dir_okay=False),
              help='With --quant: JSON {"onnx node name": [input_scale, weight_scale]}.')
def compile_cmd(
    model_path: str,
    output: str | None,
    schedule_path: str | None,
    level: int | None,
    log_path: str | None,
    strict: bool,
    batch: int | None,
    target_path: str | None,
    calib: str | None,
    calibrate: str | None,
    preset_path: str | None,
) -> None:
    """Schedule and build MODEL.onnx into a .stcobj artifact (INT8 with --quant)."""
    chosen = [name for name, v in (("--schedule", schedule_path), ("--level", level),
                                   ("--log", log_path)) if v is not None]
    if len(chosen) > 1:
        raise UsageError(f"{' and '.join(chosen)} cannot be combined: give at most one")
    if strict and log_path is None:
        raise UsageError("--strict applies to --log only")
    if level is not None and level not in (0, 1, 2, 3):
        raise UsageError(f"--level must be 0, 1, 2 or 3, got {level}")
    if batch is not None and batch < 1:
        raise UsageError(f"--batch must be >= 1, got {batch}")
    if calib is None and (calibrate is not None or preset_path is not None):
        raise UsageError("--calibrate and --preset-scales apply to --quant only")
    out = Path(output) if output else Path(Path(model_path).stem + ".stcobj")
    check_outputs({"-o": out}, inputs=[model_path, schedule_path, log_path, target_path, calib,
                                       preset_path])
    quant: dict[str, Any] | None = None
    if calib is not None:
        from autotune.commands.quant_cmds import quant_config

        quant = quant_config(calib, calibrate or "percentile", preset_path)

    from compiler.schedule import GraphSchedule
    from compiler.target import Target

    schedule = GraphSchedule.load(schedule_path) if schedule_path else None
    if schedule is not None and not schedule.source:
        schedule = _with_source(schedule, Path(schedule_path or "").name)
    if schedule is not None and batch is not None and schedule.batch != batch:
        raise ScheduleError(
            f"{schedule_path}: schedule is for batch {schedule.batch} but --batch is {batch}"
        )
    target = Target.from_file(target_path) if target_path else None
    config: dict[str, Any] = {} if level is None else {"tb.graph_schedule_level": level}
    t0 = time.perf_counter()
    accuracy: list[str] = []
    with _dispatch(log_path, strict) as lookup, \
            progress(f"importing {model_path}", feed="compiler._build") as status:
        model = load_model(model_path, batch, relax=quant is None)
        if quant is not None:  # what compile(quant_config=...) does, with the report printed
            from compiler.quant import quantize_model

            status(f"calibrating and quantizing {model.name} to INT8")
            model, report = quantize_model(model, quant)
            accuracy.append(report.line())
        status(f"compiling {model.name}")
        try:
            used = model.compile(out, schedule=schedule, target=target, **config)
        except ScheduleError as exc:
            if schedule_path:
                raise ScheduleError(f"{schedule_path}: {exc}") from None
            raise
        except LogError as exc:  # --strict and no tuned schedule: at another batch?
            raise LogError(f"{exc}{_other_batches(lookup, model.name, model.batch)}") from None
    elapsed = time.perf_counter() - t0
    for line in accuracy:
        click.echo(line)
    size = out.stat().st_size
    origin = f" from {log_path}" if lookup is not None and lookup.hits else ""
    click.echo(
        f"wrote {out} ({_mb(size)}) in {elapsed:.1f} s: {model.name} batch {used.batch}, "
        f"schedule {used.source or '(unnamed)'}{origin} ({_plural(len(used.groups), 'group')}, "
        f"{_plural(sum(g.split for g in used.groups), 'chunk')})"
    )


def _other_batches(lookup: Any, name: str, batch: int) -> str:
    """``; the log holds r18 at batch 8: ...`` when the log tuned this model at other batches."""
    if lookup is None:
        return ""
    batches = sorted({st.workload.batch for st in lookup.database.all_stats()
                      if st.workload.model == name and st.workload.batch != batch})
    if not batches:
        return ""
    listed = ", ".join(str(b) for b in batches)
    return (f"; the log holds {name} at batch {listed}: compile with --batch {batches[0]}, or "
            f"tune at batch {batch}")


def _with_source(s: GraphSchedule, source: str) -> GraphSchedule:
    from compiler.schedule import GraphSchedule

    return GraphSchedule(batch=s.batch, groups=s.groups, transfers=s.transfers, order=s.order,
                         workload_key=s.workload_key, source=source, version=s.version)


@contextlib.contextmanager
def _dispatch(log_path: str | None, strict: bool) -> Iterator[Any]:
    """``ApplyHistoryBest(log_path)`` as the active dispatch context (None when no log).

    A miss is printed as one ``graphtune: warning:`` line (the library warns
    with :class:`~autotune.HistoryMissWarning`); with ``strict`` it is an error.
    """
    if log_path is None:
        yield None
        return
    try:
        from autotune._apply_history import ApplyHistoryBest, HistoryMissWarning
    except ImportError:
        raise UsageError("--log needs autotune.ApplyHistoryBest, which this install lacks") \
            from None
    from logs import LogWarning

    ours = (HistoryMissWarning, LogWarning)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", HistoryMissWarning)
        warnings.simplefilter("always", LogWarning)
        try:
            with ApplyHistoryBest(log_path, strict=strict) as ctx:
                yield ctx
        finally:
            for w in caught:
                if issubclass(w.category, ours):
                    click.echo(f"graphtune: warning: {w.message}", err=True)
                else:
                    warnings.showwarning(w.message, w.category, w.filename, w.lineno)


# ---- run -------------------------------------------------------------------------------------
@click.command("run")
@click.argument("artifact", metavar="MODEL.stcobj", type=click.Path(dir_okay=False))
@click.option("--input", "inputs", multiple=True, metavar="NAME=FILE.npy",
              help="An input from a .npy file (repeatable); missing inputs get random data.")
@click.option("--inputs", "inputs_npz", metavar="FILE.npz", default=None,
              help="Inputs from an .npz archive, one array per input name.")
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Save the outputs to this .npz (keys: output names).")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed of the random data for inputs not given.")
@click.option("--expect", "expect", metavar="REF.npz", default=None,
              help="Compare the outputs with this .npz (keys: output names); exit 1 naming "
                   "the worst element when one differs.")
@click.option("--rtol", type=click.FloatRange(min=0), default=1e-3, show_default=True,
              help="Relative tolerance of --expect.")
@click.option("--atol", type=click.FloatRange(min=0), default=1e-4, show_default=True,
              help="Absolute tolerance of --expect: |out - ref| <= atol + rtol * |ref|.")
def run_cmd(artifact: str, inputs: Sequence[str], inputs_npz: str | None, output: str | None,
            seed: int, expect: str | None, rtol: float, atol: float) -> None:
    """Run a .stcobj artifact on the host CPU (the NPU's functional model)."""
    import numpy as np

    from autotune.commands._npz import compare, inputs_from_npz
    from compiler.artifact import read_meta
    from compiler.executor import check_input

    meta = read_meta(artifact)  # cheap: bad files fail before TVM loads
    by_name = {t.name: t for t in meta.inputs}
    specs = [_parse_input(spec, by_name) for spec in inputs]
    if output:
        check_outputs({"-o": output}, inputs=[artifact, *(path for _, path in specs),
                                               *(p for p in (inputs_npz, expect) if p)])
    given: dict[str, np.ndarray] = {}
    if inputs_npz:
        for name, value in inputs_from_npz(inputs_npz, list(by_name)).items():
            try:
                given[name] = check_input(by_name[name], value)
            except CompileError as exc:
                raise CompileError(f"--inputs {inputs_npz}: {name}: {exc}") from None
    for name, path in specs:
        try:
            given[name] = check_input(by_name[name], _load_npy(path, by_name[name]))
        except CompileError as exc:
            raise CompileError(f"--input {name}={path}: {exc}") from None
    from compiler.executor import Executor

    with progress(f"loading {artifact}", feed="compiler._build") as status:
        ex = Executor.load(artifact)
        ex.set_input(given)
        rng = np.random.default_rng(seed)
        for info in meta.inputs:
            if info.name not in given:
                value, how = _random_input(info, rng)
                click.echo(f"note: input {info.name!r} not given: {how} (seed {seed})", err=True)
                ex.set_input({info.name: value})
        status(f"running {meta.model}")
        t0 = time.perf_counter()
        outputs = ex()
        elapsed = time.perf_counter() - t0
    names = _output_names(meta, len(outputs))
    click.echo(f"{meta.model} (batch {meta.batch}, schedule {meta.schedule_source or '?'}) "
               f"ran in {elapsed:.3f} s")
    for name, arr in zip(names, outputs):
        click.echo(f"  {name}: {_summary(arr)}")
    if output:
        _save_npz(Path(output), dict(zip(names, outputs)))
        click.echo(f"wrote {output}")
    if expect:
        c = compare(dict(zip(names, outputs)), expect, rtol, atol)
        tol = f"rtol {rtol:g}, atol {atol:g}"
        if not c.ok:
            click.echo(f"graphtune: error: {c.where()} is {c.actual:.7g}, {expect} has "
                       f"{c.expected:.7g} (|diff| {abs(c.actual - c.expected):.3g} > atol + rtol "
                       f"* |ref|, {tol}); {c.mismatched} of {c.total} elements differ, max "
                       f"|diff| {c.max_abs_diff:.3g}", err=True)
            raise SystemExit(1)
        click.echo(f"matches {expect} ({tol}): max |diff| {c.max_abs_diff:.3g} over "
                   f"{c.total} elements")


def _parse_input(spec: str, by_name: dict[str, TensorInfo]) -> tuple[str, str]:
    name, sep, path = spec.partition("=")
    if not sep or not name or not path:
        raise UsageError(f"--input {spec!r}: use NAME=FILE.npy")
    if name not in by_name:
        raise UsageError(f"--input {name}: the model has no such input "
                         f"(inputs: {', '.join(by_name)})")
    return name, path


def _load_npy(path: str, info: TensorInfo) -> np.ndarray:
    """A .npy file's array, its header checked against the input before any data is read.

    The header states shape and dtype; a file claiming a shape the input does
    not have is refused without allocating it. Pickled (object) arrays are never
    loaded.
    """
    import numpy as np
    from numpy.lib import format as npy_format

    from compiler.files import open_input

    name = info.name
    p = Path(path)
    try:
        f = open_input(p, ".npy file", UsageError)
    except UsageError as exc:
        raise UsageError(f"--input {name}: {exc}") from None
    with f:
        head = f.peek(2)[:2] if hasattr(f, "peek") else b""
        try:
            version = npy_format.read_magic(f)
            if version == (1, 0):
                shape, _, dtype = npy_format.read_array_header_1_0(f)
            elif version == (2, 0):
                shape, _, dtype = npy_format.read_array_header_2_0(f)
            else:
                raise ValueError(f"unsupported .npy format version {version}")
        except Exception as exc:  # noqa: BLE001 - numpy's header parser (ast, tokenize) raises many kinds
            if head == b"PK":
                raise UsageError(f"--input {name}: {p} is an .npz archive: give one array as "
                                 ".npy") from None
            raise UsageError(f"--input {name}: {p} is not a .npy array ({last_line(exc)})") \
                from None
    if dtype.hasobject:
        raise UsageError(f"--input {name}: {p} holds Python objects (a pickle), which graphtune "
                         "never loads: save a numeric array")
    if tuple(shape) != info.shape:
        raise UsageError(f"--input {name}: {p} has shape {list(shape)}, the model expects "
                         f"{list(info.shape)}")
    try:
        value = np.load(p, allow_pickle=False)  # never unpickle a user's file
    except (ValueError, OSError, EOFError) as exc:
        raise UsageError(f"--input {name}: {p} is not a .npy array ({last_line(exc)})") \
            from None
    return value  # type: ignore[no-any-return]


def _random_input(info: TensorInfo, rng: np.random.Generator) -> tuple[np.ndarray, str]:
    """Seeded data of the input's dtype and valid range, and a phrase saying what it is."""
    import numpy as np

    dtype = np.dtype(info.dtype)
    if dtype.kind == "b":
        return rng.random(info.shape) < 0.5, "random booleans"
    if dtype.kind in "iu":
        if info.int_high is not None:
            return (rng.integers(0, info.int_high, size=info.shape).astype(dtype),
                    f"random integers in [0, {info.int_high})")
        return np.zeros(info.shape, dtype), "zeros (its valid range is unknown)"
    return rng.standard_normal(info.shape).astype(dtype), f"random N(0, 1) {dtype}"


def _output_names(meta: ArtifactMeta, n: int) -> list[str]:
    names = [t.name for t in meta.outputs]
    return names if len(names) == n else [f"output_{i}" for i in range(n)]


def _summary(arr: np.ndarray) -> str:
    import numpy as np

    head = f"shape {list(arr.shape)} {arr.dtype}"
    if arr.size == 0:
        return head + " (empty)"
    if arr.dtype.kind in "biuf":
        a = arr.astype(np.float64)
        flat = ", ".join(f"{v:.4g}" for v in a.ravel()[:4])
        more = ", ..." if arr.size > 4 else ""
        return (f"{head}  min {a.min():.4g}  max {a.max():.4g}  mean {a.mean():.4g}  "
                f"[{flat}{more}]")
    return head


def _save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    import io

    import numpy as np

    buf = io.BytesIO()
    np.savez(buf, **arrays)  # type: ignore[arg-type]  # keys are output names
    write_atomic(path, buf.getvalue())


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n / 1e3:.1f} kB"
