"""``Model.compile``: resolve a schedule, apply it, build with TVM, write the ``.stcobj``.

The schedule comes from one of three places (the TensorTurbo guide's rules):

* a :class:`~compiler.schedule.GraphSchedule` (a schedule file, a tuning record);
* a schedule function built from the manual primitives, such as
  :func:`compiler.guide_plans.resnet50_schedule`: it is called with the model's
  Relax module and the schedule it records is read back with
  :func:`compiler.graph_schedule.schedule_of`, validated, and applied to the
  model's module like any GraphSchedule (one path from schedule to IR, so a
  schedule file saved from it builds the identical artifact);
* ``None``: the active dispatch contexts (``autotune.ApplyHistoryBest``) are
  asked, and when none has the workload the automatic level
  ``config["tb.graph_schedule_level"]`` (default 3) decides.

The scheduled module is built for the host CPU (``tvm.compile(..., "llvm")``),
the functional model of the NPU, and written as one artifact
(:mod:`compiler.artifact`). Progress goes to this module's logger at INFO.
"""

from __future__ import annotations

import inspect
import logging
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compiler.errors import CompileError, OutputError, ScheduleError
from compiler.files import check_output
from compiler.schedule import GraphSchedule

if TYPE_CHECKING:
    from compiler._model_like import ModelLike as Model  # not compiler.model: it imports us
    from compiler.graph import Graph
    from compiler.target import Target

log = logging.getLogger(__name__)

LEVEL_KEY = "tb.graph_schedule_level"
DEFAULT_LEVEL = 3
# Documented TensorTurbo options that steer the NPU code generator; the CPU
# functional model has nothing for them to change.
NOT_APPLICABLE_KEYS = frozenset({
    "tb.dump_file",
    "tb.dump_graphschedule",
    "required_pass",
    "disabled_pass",
    "tb.fuse_transpose",
    "tb.fuse_reshape",
    "tb.bisection_sum",
    "tb.CSE_skip_scalar",
    "tb.insn_schedule",
})
QUANT_KEY = "quant_config"
KNOWN_KEYS = NOT_APPLICABLE_KEYS | {LEVEL_KEY, QUANT_KEY}
_INT_KINDS = ("int", "uint")
# Ops an index flows through unchanged before it reaches a take (the importer's
# negative-index normalisation is less/add/where).
_INDEX_PASSTHROUGH = frozenset({"less", "add", "where", "astype", "reshape", "squeeze",
                                "expand_dims", "permute_dims"})

ScheduleArg = GraphSchedule | Callable[..., Any] | None


def compile_model(
    model: Model,
    path: Path,
    schedule: ScheduleArg,
    target: Target | None,
    config: Mapping[str, Any],
) -> GraphSchedule:
    """Schedule, build and write ``model`` to the artifact ``path``.

    Args:
        model: The imported model; its batch changes when a GraphSchedule asks
            for another one.
        path: The ``.stcobj`` to write (atomically; its directory must exist; not
            the model's own file nor a directory or special file).
        schedule: A GraphSchedule, a schedule function, or None (see the module doc).
        target: The chip description; the default STCP920 when None.
        config: The guide's compile options; see :func:`check_config`. ``quant_config``
            (the guide's quantization dict, :class:`compiler.quant.QuantConfig`)
            quantizes the model to INT8 first (calibration, QDQ with power-of-two
            scales) and builds the INT8 model; its accuracy is logged at INFO.

    Returns:
        The schedule that was applied.

    Raises:
        ScheduleError: The schedule is malformed or does not fit the model.
        CompileError: A bad option, a TVM build failure, or an unwritable path.

    Example:
        >>> m = load_onnx("resnet50.onnx", shape={"input": [16, 3, 224, 224]})
        >>> compile_model(m, Path("r50.stcobj"), resnet50_schedule, None, {})
    """
    from compiler.target import Target

    level = check_config(config, schedule_given=schedule is not None)
    tgt = target if target is not None else Target.default()
    timings: dict[str, float] = {}
    dest = Path(path)
    try:  # before the build: a bad path fails in a second, not after minutes
        check_output(dest, inputs=[model.path])
    except OutputError as exc:
        raise CompileError(str(exc)) from None
    check_linker()
    if config.get(QUANT_KEY) is not None:
        from compiler.quant import QuantConfig, quantize_model

        qcfg = QuantConfig.from_dict(config[QUANT_KEY])  # checked before any work
        with _stage(timings, "quantize", f"calibrating and quantizing {model.name} to INT8"):
            model, report = quantize_model(model, qcfg)
        log.info("%s", report.line())

    with _stage(timings, "import", f"importing {model.name} into Relax"):
        ensure_imported(model)
    with _stage(timings, "schedule", f"scheduling {model.name}"):
        resolved = resolve_schedule(model, schedule, tgt, level)
    graph = model.graph
    log.info(
        "schedule %s: %d groups, %d steps, batch %d",
        resolved.source or "(unnamed)", len(resolved.groups), len(resolved.order), resolved.batch,
    )
    with _stage(timings, "apply", "applying the schedule to Relax"):
        from compiler._apply import apply_schedule

        scheduled = apply_schedule(model.mod, graph, resolved)
    size = _build_and_write(model, graph, scheduled, resolved, tgt, dest, timings)
    # DEBUG, not INFO: INFO records are the CLI's progress stages, and `graphtune compile`
    # reports the write itself (once, with the command's whole time).
    log.debug(
        "wrote %s (%.1f MB) in %.1f s of build stages", dest, size / 1e6, sum(timings.values())
    )
    return resolved


NO_LINKER = "no C compiler to link the artifact"


def check_linker() -> None:
    """Fail in a second, not after the build, when TVM has nothing to link ``lib.so`` with.

    ``export_library`` links with ``$CXX``/``$CC`` or the first of g++, gcc, clang++,
    clang, c++, cc on ``PATH`` (``tvm.support.cc.get_cc``). The search space's own
    compiled core is optional (Python decodes without it); linking an artifact is not.

    Raises:
        CompileError: No such compiler (the message starts with :data:`NO_LINKER`).
    """
    from tvm.support.cc import get_cc

    if get_cc() is None:
        raise CompileError(f"{NO_LINKER} (TVM links lib.so with g++, gcc, clang or cc from "
                           "PATH, or $CXX): install one (Debian: apt install gcc) or set CXX")


def check_config(config: Mapping[str, Any], schedule_given: bool = False) -> int:
    """Check compile options and return the automatic level (0-3).

    The guide's documented keys are accepted; those that only steer the NPU
    code generator are noted in the log and ignored. Anything else is an error.

    Raises:
        CompileError: An unknown key, or a level that is not 0-3.
    """
    unknown = sorted(k for k in config if k not in KNOWN_KEYS)
    if unknown:
        raise CompileError(
            f"unknown compile option {unknown[0]!r} (known: {', '.join(sorted(KNOWN_KEYS))})"
        )
    for key in sorted(k for k in config if k in NOT_APPLICABLE_KEYS):
        log.info("compile option %s does not apply to the CPU functional model: ignored", key)
    level = config.get(LEVEL_KEY, DEFAULT_LEVEL)
    if isinstance(level, bool) or not isinstance(level, int) or level not in (0, 1, 2, 3):
        raise CompileError(f"{LEVEL_KEY} must be 0, 1, 2 or 3, got {level!r}")
    if schedule_given and LEVEL_KEY in config:
        log.info("%s only applies when schedule is None: ignored", LEVEL_KEY)
    return int(level)


def ensure_imported(model: Model) -> None:
    """Import the model into Relax now, with TVM's console chatter sent to the log.

    The importer and TVM's C++ code print harmless notes ("Renaming name ...",
    "Fast mode segfaults when there are out-of-bounds indices") straight to
    stderr; they go to this module's logger at DEBUG instead.
    """
    import warnings

    from compiler.executor import native_output_to_log

    with native_output_to_log(log), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Renaming name", category=UserWarning)
        _ = model.graph
        _ = model.mod


def resolve_schedule(
    model: Model, schedule: ScheduleArg, target: Target, level: int
) -> GraphSchedule:
    """The validated GraphSchedule for ``model`` from any of the accepted forms.

    Raises:
        ScheduleError: The schedule is malformed or does not fit the model.
    """
    if isinstance(schedule, GraphSchedule):
        if schedule.batch < 1:
            raise ScheduleError(f"schedule batch must be >= 1, got {schedule.batch}")
        rebatched = schedule.batch != model.batch
        if rebatched:
            log.info("schedule is for batch %d: re-importing the model at that batch",
                     schedule.batch)
            own_key, own_batch = model.graph.workload_key, model.batch
            try:
                model.set_batch(schedule.batch)
                ensure_imported(model)
            except Exception as exc:  # noqa: BLE001 - the importer raises many kinds
                # Most often the schedule is another model's: say so before TVM's reason.
                lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
                raise ScheduleError(
                    f"this schedule is for workload {schedule.workload_key}, made for batch "
                    f"{schedule.batch}; {model.name} is {own_key} at batch {own_batch} and "
                    f"cannot be imported at batch {schedule.batch} "
                    f"({lines[-1][:200] if lines else type(exc).__name__}): make the schedule "
                    "for this model"
                ) from None
        try:
            schedule.validate(model.graph, target)
        except ScheduleError as exc:
            if rebatched and schedule.workload_key != model.graph.workload_key:
                raise ScheduleError(
                    f"schedule is for batch {schedule.batch} and workload "
                    f"{schedule.workload_key}; this model at batch {schedule.batch} is "
                    f"{model.graph.workload_key}: make the schedule for this model"
                ) from None
            raise ScheduleError(str(exc)) from None
        return schedule
    if schedule is not None:
        if not callable(schedule):
            raise ScheduleError(
                f"schedule must be a GraphSchedule, a schedule function or None, "
                f"got {type(schedule).__name__}"
            )
        return _from_function(model, schedule, target)
    graph = model.graph
    from compiler.dispatch import resolve

    found = resolve(graph.workload_key, target.key, fallback=f"automatic level O{level}")
    if found is not None:
        try:
            tuned = GraphSchedule.from_json(found)
            tuned.validate(graph, target)
        except ScheduleError as exc:
            raise ScheduleError(f"tuned schedule for workload {graph.workload_key}: {exc}") \
                from None
        log.info("using the tuned schedule for workload %s", graph.workload_key)
        return tuned
    from compiler.auto import graph_schedule_level

    log.info("no tuned schedule: automatic level O%d", level)
    return graph_schedule_level(graph, target, level)


def _from_function(model: Model, fn: Callable[..., Any], target: Target) -> GraphSchedule:
    from compiler.graph_schedule import schedule_of

    name = getattr(fn, "__name__", type(fn).__name__)
    if _accepts_batch(fn):
        result = fn(model.mod, batch=model.batch)
    else:
        result = fn(model.mod)
    recorded = result if isinstance(result, GraphSchedule) else schedule_of(result)
    try:
        recorded.validate(model.graph, target)
    except ScheduleError as exc:
        raise ScheduleError(f"{name}: {exc}") from None
    return GraphSchedule(
        batch=recorded.batch,
        groups=recorded.groups,
        transfers=recorded.transfers,
        order=recorded.order,
        workload_key=recorded.workload_key or model.graph.workload_key,
        source=name if recorded.source in ("", "manual") else recorded.source,
    )


def _accepts_batch(fn: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return "batch" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD
                                    for p in params.values())


def _build_and_write(
    model: Model,
    graph: Graph,
    scheduled: Any,
    schedule: GraphSchedule,
    target: Target,
    dest: Path,
    timings: dict[str, float],
) -> int:
    import tvm

    from compiler.artifact import ArtifactMeta, write_artifact
    from compiler.executor import native_output_to_log

    with _stage(timings, "build", "building for the host CPU (tvm.compile, llvm)"):
        try:
            with native_output_to_log(log):
                ex = tvm.compile(scheduled, target="llvm")
        except Exception as exc:
            log.debug("tvm.compile failed", exc_info=True)
            raise CompileError(f"TVM could not build {model.name}: {_last_line(exc)}") from None
    with tempfile.TemporaryDirectory(prefix="graphtune-build-") as tmp:
        lib = Path(tmp) / "lib.so"
        with _stage(timings, "export", "exporting the library"):
            try:
                with native_output_to_log(log):
                    ex.export_library(str(lib))
            except Exception as exc:
                log.debug("export_library failed", exc_info=True)
                raise CompileError(f"cannot export the library: {_last_line(exc)}") from None
        with _stage(timings, "write", f"writing {dest.name}"):
            ir_text = scheduled.script(show_meta=False)
            meta = ArtifactMeta(
                model=model.name,
                workload_key=graph.workload_key,
                target_key=target.key,
                target_hash=target.hash,
                batch=graph.batch,
                inputs=_input_infos(model, graph, scheduled),
                outputs=_output_infos(model, graph),
                schedule_source=schedule.source,
                graphtune_version=_graphtune_version(),
                tvm_version=str(tvm.__version__),
                created=datetime.now(UTC).isoformat(timespec="seconds"),
                timings_s=dict(timings),
            )
            return write_artifact(dest, lib, schedule.dumps(indent=1), ir_text, meta,
                                  inputs=(model.path,))


def _input_infos(model: Model, graph: Graph, scheduled: Any) -> tuple[Any, ...]:
    """ONNX input names with the shapes and dtypes of ``main``'s params (same order)."""
    from compiler._relax_util import shape_of
    from compiler.artifact import TensorInfo

    params = list(scheduled["main"].params)
    names = list(model.data_inputs)
    if len(params) != len(names):
        raise CompileError(
            f"{model.name}: main has {len(params)} params but the model has "
            f"{len(names)} data inputs"
        )
    ranges = index_ranges(graph)
    out = []
    for name, param, gname in zip(names, params, graph.inputs):
        dtype = str(param.ty.dtype)
        low, high = ranges.get(gname, (None, None)) if dtype.startswith(_INT_KINDS) else (None, None)
        out.append(TensorInfo(name, shape_of(param.ty), dtype, int_high=high, int_low=low))
    return tuple(out)


def _output_infos(model: Model, graph: Graph) -> tuple[Any, ...]:
    from compiler.artifact import TensorInfo

    info = model.get_output_info()
    if len(info) == len(graph.outputs):
        return tuple(TensorInfo(n, tuple(d["shape"]), d["dtype"]) for n, d in info.items())
    return tuple(
        TensorInfo(t, graph.tensors[t].shape, graph.tensors[t].dtype) for t in graph.outputs
    )


def index_ranges(graph: Graph) -> dict[str, tuple[int, int]]:
    """Integer inputs used as ``take`` indices -> ``(low, high)``: valid values are ``low <= x < high``.

    ``high`` is the gathered table's size along the take axis (the smallest,
    when one input indexes several tables). ``low`` is ``-high`` when every path
    from the input to a take passes the importer's negative-index normalisation
    (``where(x < 0, x + n, x)``, as ONNX ``Gather`` defines negative indices),
    else 0. Inputs that reach no take are absent.
    """
    out: dict[str, tuple[int, int]] = {}
    for name in graph.inputs:
        if not graph.tensors[name].dtype.startswith(_INT_KINDS):
            continue
        seen = {name}
        frontier = [(name, False)]  # (tensor, passed a where)
        best: int | None = None
        wrapped = True
        while frontier:
            t, normalised = frontier.pop()
            for i in graph.consumers.get(t, ()):
                op = graph.ops[i]
                if op.op_type == "take" and len(op.weights) == 1 and op.inputs == (t,):
                    table = graph.tensors[op.weights[0]]
                    axis = int(op.attr("axis", 0) or 0)
                    if table.shape:
                        n = table.shape[axis]
                        best = n if best is None else min(best, n)
                        wrapped = wrapped and normalised
                elif (op.op_type in _INDEX_PASSTHROUGH and op.output not in seen
                      and graph.tensors[op.output].dtype.startswith((*_INT_KINDS, "bool"))):
                    seen.add(op.output)
                    frontier.append((op.output, normalised or op.op_type == "where"))
        if best is not None:
            out[name] = (-best if wrapped else 0, best)
    return out


@contextmanager
def _stage(timings: dict[str, float], key: str, what: str) -> Iterator[None]:
    log.info("%s ...", what)
    t0 = time.perf_counter()
    try:
        yield
    finally:
        timings[key] = timings.get(key, 0.0) + time.perf_counter() - t0


def _graphtune_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("graphtune")
    except PackageNotFoundError:
        return "0+unknown"


def _last_line(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    return lines[-1] if lines else type(exc).__name__
