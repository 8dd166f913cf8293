"""PyTorch models: a ``torch.export`` program (``.pt2`` file or in memory) as a :class:`Model`.

Two import paths, tried in this order:

1. ``torch.export`` -> TVM's ``relax.frontend.torch.from_exported_program`` (the
   weights bound as constants, a one-output tuple unwrapped as the ONNX path does).
2. If that fails (an op the translator does not know, or a module graphtune's
   normaliser cannot read), ``torch.onnx.export`` (the TorchScript exporter,
   opset 17, into memory) -> today's ONNX path (:class:`Model`).

:attr:`TorchModel.import_path` says which one was used and why (``graphtune info``
prints it). torch is optional (``pip install -e '.[torch]'``); without it a ``.pt2``
is refused with one line naming the extra.

Example:
    >>> m = load_torch(MyNet().eval(), (torch.randn(1, 3, 224, 224),))
    >>> m.import_path
    'torch.export (relax.frontend.torch.from_exported_program)'
    >>> m.compile("mynet.stcobj")
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compiler._formats import ACCEPTED, TORCH_EXTRA
from compiler.errors import ModelError
from compiler.model import Model

if TYPE_CHECKING:
    from compiler.graph import Graph

log = logging.getLogger(__name__)

PATH_EXPORT = "torch.export (relax.frontend.torch.from_exported_program)"
PATH_ONNX = "torch.onnx.export (TorchScript exporter, opset 17) -> ONNX"
ONNX_OPSET = 17
VIAS = ("auto", "export", "onnx")


class _Skipped(Exception):
    """The torch.export path is not to be tried."""


def import_torch() -> Any:
    """``torch``, or a ModelError naming the extra that installs it."""
    try:
        import torch
    except ImportError:
        raise ModelError(f"PyTorch models need torch: {TORCH_EXTRA}") from None
    return torch


def load_model_file(path: str | os.PathLike[str]) -> Model:
    """An ONNX file or a ``.pt2`` (by its suffix): what every graphtune command loads."""
    if Path(path).suffix.lower() == ".pt2":
        return load_pt2(path)
    from compiler.model import load_onnx

    return load_onnx(path)


def load_pt2(path: str | os.PathLike[str]) -> TorchModel:
    """Load a ``torch.export.save`` file (``.pt2``) into a :class:`TorchModel`.

    Raises:
        ModelError: torch is not installed, or the file is not a torch.export program.
    """
    p = Path(path)
    if not p.exists():
        raise ModelError(f"no such model file: {p}")
    if p.is_dir():
        raise ModelError(f"{p} is a directory, not a .pt2 file")
    torch = import_torch()
    try:
        with _quiet():
            ep = torch.export.load(str(p))
    except Exception as exc:  # noqa: BLE001 - torch's loader raises many kinds
        raise ModelError(f"{p} is not a torch.export program or is truncated "
                         f"({type(exc).__name__}); {ACCEPTED}") from None
    return TorchModel(ep, name=p.stem, path=str(p))


def load_torch(
    module_or_program: Any,
    example_inputs: Sequence[Any] | Any | None = None,
    *,
    name: str | None = None,
    shape: Mapping[str, Sequence[int]] | None = None,
    via: str = "auto",
) -> TorchModel:
    """A :class:`TorchModel` from an ``nn.Module`` (exported here) or an ``ExportedProgram``.

    Args:
        module_or_program: ``torch.nn.Module`` (put in eval mode and exported with
            ``torch.export.export``) or a ``torch.export.ExportedProgram``.
        example_inputs: The module's example inputs (a tensor or a tuple of tensors);
            needed for a module, optional for a program.
        name: The model's name (default: the class name).
        shape: Input shapes to set, as :meth:`Model.set_input_shape`.
        via: ``"auto"`` (``from_exported_program``, ONNX if that fails), ``"export"``
            (only ``from_exported_program``) or ``"onnx"`` (only ``torch.onnx.export``).
    """
    torch = import_torch()
    module = None
    if isinstance(module_or_program, torch.export.ExportedProgram):
        ep = module_or_program
    elif isinstance(module_or_program, torch.nn.Module):
        if example_inputs is None:
            raise ModelError("load_torch(module, example_inputs): a module needs example inputs")
        module = module_or_program.eval()
        args = _as_tuple(example_inputs)
        try:
            with _quiet():
                ep = torch.export.export(module, args)
        except Exception as exc:  # noqa: BLE001 - torch.export raises many kinds
            raise ModelError(f"torch.export cannot export {type(module).__name__}: "
                             f"{_last_line(exc)}") from None
    else:
        raise ModelError(f"load_torch takes an nn.Module or an ExportedProgram, "
                         f"not {type(module_or_program).__name__}")
    model = TorchModel(ep, name=name or type(module or ep).__name__, module=module, via=via)
    if shape:
        model.set_input_shape(shape)
    return model


class TorchModel(Model):
    """A :class:`Model` imported from a ``torch.export`` program.

    The names of the inputs are the program's user inputs (``x``), of the outputs
    ``output_0``, ... . Changing an input shape re-exports the module at that shape
    (torch.export specialises shapes unless the program was exported with
    ``dynamic_shapes``); the ONNX fallback exports at the current shapes too.
    """

    def __init__(self, ep: Any, name: str, path: str | None = None, module: Any = None,
                 via: str = "auto") -> None:
        if via not in VIAS:
            raise ModelError(f"via must be one of {', '.join(VIAS)}, got {via!r}")
        self.via = via
        self.name = name
        self.path = path
        self._ep = ep
        self._module = module
        self.weight_inputs = []
        self._weights = {}
        self._mod = None
        self._graph = None
        self._onnx: Model | None = None
        self.import_path = ""
        """Which import was used (:data:`PATH_EXPORT` or :data:`PATH_ONNX` with the reason)."""
        self._exported_shapes: dict[str, list[int]] = {}
        self._shapes = {}
        self._dtypes = {}
        self.data_inputs = []
        for spec in ep.graph_signature.input_specs:
            if spec.kind.name != "USER_INPUT":
                continue
            val = _placeholder_val(ep, spec.arg.name)
            if val is None:
                continue  # a non-tensor input (a constant the program specialised)
            self.data_inputs.append(spec.arg.name)
            self._shapes[spec.arg.name] = [_concrete(d) for d in val.shape]
            self._dtypes[spec.arg.name] = str(val.dtype).removeprefix("torch.")
        self._exported_shapes = {n: list(s) for n, s in self._shapes.items()}
        self._output_vals = [_placeholder_val(ep, getattr(s.arg, "name", ""))
                             for s in ep.graph_signature.output_specs
                             if s.kind.name == "USER_OUTPUT"]

    # ---- ONNX view -------------------------------------------------------------------
    @property  # type: ignore[override]  # Model sets it as an attribute
    def proto(self) -> Any:
        """The ONNX export of the model at its current shapes (made on first use)."""
        return self._onnx_model().proto

    def get_output_info(self) -> dict[str, dict[str, Any]]:
        g = self.graph
        return {f"output_{i}": {"shape": list(g.tensors[t].shape), "dtype": g.tensors[t].dtype}
                for i, t in enumerate(g.outputs)}

    def set_input_shape(self, input_shape: Mapping[str, Sequence[int]]) -> None:
        super().set_input_shape(input_shape)
        self._onnx = None

    @property
    def graph(self) -> Graph:
        """The Graph of :attr:`mod` (the torch path builds it while checking the import)."""
        if self._graph is None:
            mod = self.mod
            if self._graph is None:
                from compiler._relax_graph import build_graph

                self._graph = build_graph(mod, self.name)
        return self._graph

    # ---- import ----------------------------------------------------------------------
    def _import(self, zero_weights: bool = False) -> Any:
        from compiler._relax_graph import build_graph, normalize
        from compiler.executor import native_output_to_log

        problem = "not tried (via='onnx')"
        with native_output_to_log(log):
            try:
                if self.via == "onnx":
                    raise _Skipped
                mod = normalize(self._from_exported_program())
                graph = build_graph(mod, self.name)
            except _Skipped:
                pass
            except ModelError:
                raise
            except Exception as exc:  # noqa: BLE001 - the translator raises many kinds
                problem = _last_line(exc)
            else:
                self.import_path = PATH_EXPORT
                self._graph = graph
                return mod
        if self.via == "export":
            raise ModelError(f"{self.name}: from_exported_program cannot import this program: "
                             f"{problem}")
        log.info("%s: from_exported_program failed (%s); importing through ONNX",
                 self.name, problem)
        onnx_model = self._onnx_model()
        mod = onnx_model.mod
        self.import_path = f"{PATH_ONNX} (from_exported_program: {problem})"
        return mod

    def _program_at_shapes(self) -> Any:
        """The exported program at the current input shapes (re-exported when they changed)."""
        if self._shapes == self._exported_shapes and not _has_symbolic(self._ep, self.data_inputs):
            return self._ep
        torch = import_torch()
        args = self._example_args()
        source = self._module if self._module is not None else self._ep.module()
        try:
            with _quiet():
                return torch.export.export(source, args)
        except Exception as exc:  # noqa: BLE001 - torch.export raises many kinds
            shapes = ", ".join(f"{n} {self._shapes[n]}" for n in self.data_inputs)
            was = ", ".join(f"{n} {self._exported_shapes[n]}" for n in self.data_inputs)
            why = f"torch.export: {_first_line(exc)}" if self._module is not None else \
                "its shapes are static"
            first = self.data_inputs[0] if self.data_inputs else "x"
            raise ModelError(
                f"{self.name} was exported at {was} and cannot be re-exported at {shapes} "
                f"({why}): export it at that shape, or with dynamic_shapes="
                f"{{'{first}': {{0: torch.export.Dim('batch')}}}}"
            ) from None

    def _from_exported_program(self) -> Any:
        from tvm.relax.frontend.torch import from_exported_program

        ep = self._program_at_shapes()
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            mod = from_exported_program(ep, unwrap_unit_return_tuple=True)
        # BatchNorm after a convolution folded into it, as the ONNX exporter does; any
        # other BatchNorm as inference arithmetic. The translator binds the op's
        # (value, mean, var) tuples outside the dataflow block: canonicalising then
        # dead-code elimination drops them (normalize runs the two the other way round).
        from tvm import relax

        for p in (relax.transform.FoldBatchnormToConv2D(),
                  relax.transform.DecomposeOpsForInference(),
                  relax.transform.CanonicalizeBindings(),
                  relax.transform.DeadCodeElimination(["main"])):
            mod = p(mod)
        return scalars_as_constants(mod)

    def _onnx_model(self) -> Model:
        """The model through ``torch.onnx.export`` into the ONNX path, at the current shapes."""
        if self._onnx is None:
            torch = import_torch()
            import onnx

            ep = self._program_at_shapes()
            source = self._module if self._module is not None else ep.module()
            buf = io.BytesIO()
            try:
                with _quiet():
                    torch.onnx.export(source, self._example_args(), buf, dynamo=False,
                                      opset_version=ONNX_OPSET, input_names=self.data_inputs,
                                      do_constant_folding=True)
            except Exception as exc:  # noqa: BLE001 - the exporter raises many kinds
                raise ModelError(f"{self.name}: neither from_exported_program nor "
                                 f"torch.onnx.export can import this program: {_last_line(exc)}") \
                    from None
            proto = onnx.load_from_string(buf.getvalue())
            self._onnx = Model(proto, name=self.name, path=self.path)
        return self._onnx

    def _example_args(self) -> tuple[Any, ...]:
        """Inputs of the current shapes: zeros (integers) or seeded normal values."""
        torch = import_torch()
        gen = torch.Generator().manual_seed(0)
        args = []
        for n in self.data_inputs:
            dtype = getattr(torch, self._dtypes[n])
            if dtype.is_floating_point:
                args.append(torch.randn(self._shapes[n], generator=gen).to(dtype))
            else:
                args.append(torch.zeros(self._shapes[n], dtype=dtype))
        return tuple(args)

    def _check_ops(self) -> None:  # the ops are checked by whichever import runs
        return None


_SCALAR_OPS = {"relax.add", "relax.subtract", "relax.multiply", "relax.divide", "relax.power",
               "relax.maximum", "relax.minimum"}


def scalars_as_constants(mod: Any) -> Any:
    """Scalar operands of arithmetic (``x + 1e-5``) as 0-d constants.

    The torch translator writes BatchNorm's epsilon and similar literals as
    ``T.float32(...)`` immediates (``FloatImm``); as constants, the weight arithmetic that folding
    BatchNorm into the convolutions leaves (``gamma / sqrt(var + eps)``) is folded by
    :func:`compiler._relax_graph.fold_constants_numpy` in microseconds instead of
    ``FoldConstant`` compiling each call with LLVM (160 calls, ~14 s of CPU, on a
    ResNet-18 layout).
    """
    import numpy as np
    import tvm
    from tvm import relax

    from compiler._relax_util import emit_main, main_bindings, remap

    bindings = main_bindings(mod)
    f = mod["main"]
    changed = 0

    scalar = (tvm.tirx.FloatImm, tvm.tirx.IntImm)

    def const_of(arg: Any, like: Any) -> Any:
        nonlocal changed
        if not isinstance(arg, scalar):
            return arg
        dtype = str(getattr(getattr(like, "ty", None), "dtype", "") or arg.dtype)
        changed += 1
        return relax.const(np.array(arg.value, dtype=dtype), dtype)

    def body(bb: Any) -> Any:
        vmap: dict[Any, Any] = {}
        for b in bindings:
            value = remap(b.value, vmap)
            if (isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op)
                    and str(value.op.name) in _SCALAR_OPS):
                tensors = [a for a in value.args if not isinstance(a, scalar)]
                if tensors:
                    args = [const_of(a, tensors[0]) for a in value.args]
                    value = relax.Call(value.op, args, value.attrs, value.ty_args)
            vmap[b.var] = bb.emit(value, name_hint=b.var.name)
        out = f.body.body
        return vmap.get(out, remap(out, vmap))

    new = emit_main(mod, list(f.params), body)
    return new if changed else mod


def _as_tuple(example_inputs: Any) -> tuple[Any, ...]:
    if isinstance(example_inputs, tuple):
        return example_inputs
    if isinstance(example_inputs, list):
        return tuple(example_inputs)
    return (example_inputs,)


def _placeholder_val(ep: Any, name: str) -> Any:
    for node in ep.graph.nodes:
        if node.name == name:
            return node.meta.get("val")
    for node in ep.graph.nodes:  # outputs: the output node's args
        if node.op == "output":
            for arg in node.args[0]:
                if getattr(arg, "name", None) == name:
                    return arg.meta.get("val")
    return None


def _concrete(d: Any) -> int:
    """A dim as an int: a symbolic one (dynamic_shapes) reads as its example value."""
    try:
        return int(d)
    except Exception:  # noqa: BLE001 - a SymInt without a hint
        hint = getattr(getattr(d, "node", None), "hint", None)
        return int(hint) if hint is not None else -1


def _has_symbolic(ep: Any, names: Sequence[str]) -> bool:
    import torch

    for n in names:
        val = _placeholder_val(ep, n)
        if val is not None and any(isinstance(d, torch.SymInt) for d in val.shape):
            return True
    return False


def _first_line(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    return lines[0][:300] if lines else type(exc).__name__


def _last_line(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else type(exc).__name__


@contextlib.contextmanager
def _quiet() -> Any:
    """torch's exporters warn (deprecation, torchvision missing) and print: to the log."""
    out = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(out):
        warnings.simplefilter("ignore")
        logging.getLogger("torch").setLevel(logging.ERROR)
        yield
    for line in out.getvalue().splitlines():
        log.debug("torch: %s", line)
