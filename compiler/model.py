"""``Model``: an imported ONNX model, as the TensorTurbo guide's ``Model``.

Example:
    >>> m = load_onnx("resnet50.onnx")
    >>> m.get_input_info()
    {'input': {'shape': [1, 3, 224, 224], 'dtype': 'float32'}}
    >>> m.set_input_shape({"input": [16, 3, 224, 224]})
    >>> m.graph.flops_per_sample ...
    >>> m.compile("resnet50.stcobj", schedule=resnet50_schedule)
"""

from __future__ import annotations

import contextlib
import gc
import io
import logging
import math
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compiler._model_like import WEIGHT_INPUTS_KEY
from compiler.errors import GraphtuneError, ModelError

if TYPE_CHECKING:
    import onnx

    from compiler.graph import Graph
    from compiler.schedule import GraphSchedule
    from compiler.target import Target

log = logging.getLogger(__name__)


class Model:
    """An imported model: ONNX proto, the normalised Relax module and its Graph."""

    def __init__(
        self,
        proto: onnx.ModelProto,
        name: str,
        shape: Mapping[str, Sequence[int]] | None = None,
        path: str | None = None,
    ) -> None:
        self.proto = proto
        self.name = name
        self.path = path
        self._check_ops()
        check_constant_sizes(proto, name)
        init_names = {i.name for i in proto.graph.initializer}
        meta = {p.key: p.value for p in proto.metadata_props}
        self.weight_inputs: list[str] = [
            w for w in meta.get(WEIGHT_INPUTS_KEY, "").split(",") if w
        ]
        self._all_inputs = [i for i in proto.graph.input if i.name not in init_names]
        self.data_inputs = [i.name for i in self._all_inputs if i.name not in self.weight_inputs]
        self._shapes: dict[str, list[int]] = {}
        self._dtypes: dict[str, str] = {}
        for vi in self._all_inputs:
            self._shapes[vi.name] = _onnx_shape(vi)
            self._dtypes[vi.name] = _onnx_dtype(vi)
        self._weights: dict[str, Any] | None = None
        self._mod: Any = None
        self._graph: Graph | None = None
        if shape:
            self.set_input_shape(shape)

    # ---- the guide's model API -------------------------------------------------------
    def get_input_info(self) -> dict[str, dict[str, Any]]:
        """``{name: {"shape": [...], "dtype": str}}`` of the data inputs."""
        return {
            n: {"shape": list(self._shapes[n]), "dtype": self._dtypes[n]} for n in self.data_inputs
        }

    def get_output_info(self) -> dict[str, dict[str, Any]]:
        """``{name: {"shape": [...], "dtype": str}}`` of the outputs (static shapes)."""
        g = self.graph
        names = [o.name for o in self.proto.graph.output]
        out = {}
        for name, t in zip(names, g.outputs):
            tensor = g.tensors[t]
            out[name] = {"shape": list(tensor.shape), "dtype": tensor.dtype}
        return out

    def set_input_shape(self, input_shape: Mapping[str, Sequence[int]]) -> None:
        """Change input shapes (e.g. the batch); shapes of the whole model are re-derived."""
        for name, shape in input_shape.items():
            if name not in self.data_inputs:
                raise ModelError(
                    f"model has no input {name!r} (inputs: {', '.join(self.data_inputs)})"
                )
            if not shape or not all(isinstance(d, int) and d > 0 for d in shape):
                raise ModelError(f"shape of {name} must be positive integers, got {shape!r}")
            old = self._shapes[name]
            if len(old) != len(shape):
                raise ModelError(f"input {name} has rank {len(old)}, got shape {list(shape)}")
            self._shapes[name] = [int(d) for d in shape]
        self._mod = None
        self._graph = None

    def set_batch(self, batch: int) -> None:
        """Set dim 0 of every data input to ``batch``."""
        if batch < 1:
            raise ModelError(f"batch must be >= 1, got {batch}")
        self.set_input_shape({n: [batch, *self._shapes[n][1:]] for n in self.data_inputs})

    @property
    def batch(self) -> int:
        """Dim 0 of the first data input."""
        return self._shapes[self.data_inputs[0]][0] if self.data_inputs else 1

    # ---- Relax and Graph -------------------------------------------------------------
    @property
    def mod(self) -> Any:
        """The normalised Relax IRModule (imported on first use)."""
        if self._mod is None:
            self._mod = self._import()
        return self._mod

    @property
    def graph(self) -> Graph:
        """The :class:`~compiler.graph.Graph` view of :attr:`mod`."""
        if self._graph is None:
            from compiler._relax_graph import build_graph

            # The Graph never depends on weight values: when the weights are inputs
            # that would have to be generated, read the structure with zeros instead.
            if self._mod is None and self.weight_inputs:
                mod = self._import(zero_weights=True)
            else:
                mod = self.mod
            self._graph = build_graph(mod, self.name)
        return self._graph

    @property
    def weights(self) -> dict[str, Any]:
        """Values of the weight inputs (zoo "inputs" mode), regenerated deterministically."""
        if self._weights is None:
            if not self.weight_inputs:
                self._weights = {}
            else:
                from compiler import zoo

                self._weights = zoo.materialize_weights(self.proto)
        return self._weights

    def _import(self, zero_weights: bool = False) -> Any:
        from compiler._relax_graph import normalize
        from compiler.executor import native_output_to_log

        # normalize's FoldConstant builds kernels, and TVM's C++ prints notes such as
        # "Fast mode segfaults when there are out-of-bounds indices" to fd 2: to the log,
        # for the Python API as for the CLI.
        with native_output_to_log(log):
            return normalize(self._import_unnormalized(zero_weights))

    def _import_unnormalized(self, zero_weights: bool = False) -> Any:
        """``from_onnx`` with the weight inputs bound (zeros, or :attr:`weights`)."""
        import tvm
        from tvm import relax

        from compiler._onnx_fold import fold_shapes
        from compiler.executor import native_output_to_log

        for n in self.data_inputs:
            if any(d <= 0 for d in self._shapes[n]):
                raise ModelError(
                    f"input {n} has a symbolic shape {self._shapes[n]}: give a concrete shape "
                    "(--batch B, or shape={...})"
                )
        shape_dict = {vi.name: self._shapes[vi.name] for vi in self._all_inputs}
        proto, inputs, held = self._with_shared_weights_as_inputs()
        shape_dict.update({vi.name: _onnx_shape(vi) for vi in inputs[len(self._all_inputs):]})
        problem = ""
        printed = io.StringIO()  # the frontend print()s "Error converting operator ..."
        mod = None
        with native_output_to_log(log):
            try:
                mod = _from_onnx(proto, shape_dict, printed)
            except GraphtuneError as exc:  # a user op's check (compiler.ops): already one line
                raise type(exc)(f"{self.name}: {exc}") from None
            except Exception as exc:
                text = str(exc).strip()
                problem = text.splitlines()[-1] if text else type(exc).__name__
                # TVM folds most shape arithmetic itself; when it cannot (a Reshape target
                # built from Gather(Shape(x), [i]), as torch exports advanced indexing),
                # fold it with the fixed shapes first and try again.
                folded = fold_shapes(proto, shape_dict)
                if folded is not proto:
                    try:
                        mod = _from_onnx(folded, shape_dict, printed)
                    except Exception:
                        pass  # report the error of the graph as given
            if mod is None:
                # Free the failed import's frames here: TVM's BlockBuilder prints a
                # warning to stderr when it is destroyed, which must go to the log.
                gc.collect()
        for line in printed.getvalue().splitlines():
            log.debug("frontend: %s", line)
        if mod is None:
            raise ModelError(f"{self.name}: TVM cannot import this model: {problem}")
        if self.weight_inputs or held:
            import numpy as np

            params = list(mod["main"].params)
            binds = {}
            for vi, p in zip(inputs, params, strict=True):
                if vi.name in held:
                    value = held[vi.name]
                elif vi.name not in self.weight_inputs:
                    continue
                elif zero_weights:
                    value = np.zeros(self._shapes[vi.name], dtype=self._dtypes[vi.name])
                else:
                    value = self.weights[vi.name]
                binds[p.name] = tvm.runtime.tensor(value)
            mod = relax.transform.BindParams("main", binds)(mod)
        return mod

    def _with_shared_weights_as_inputs(self) -> tuple[Any, list[Any], dict[str, Any]]:
        """The proto to import, its inputs in order, and initializers turned into inputs.

        An initializer read through a view op and elsewhere (a tied weight) is imported
        as an input and bound after the import, so the tie survives (see
        :mod:`compiler._onnx_shared`).
        """
        from compiler._onnx_shared import initializers_as_inputs, shared_view_initializers

        names = shared_view_initializers(self.proto)
        if not names:
            return self.proto, list(self._all_inputs), {}
        proto, new_inputs, values = initializers_as_inputs(self.proto, names)
        return proto, [*self._all_inputs, *new_inputs], values

    def _check_ops(self) -> None:
        from tvm.relax.frontend.onnx import onnx_frontend

        from compiler.ops import unknown_nodes

        bad = unknown_nodes(self.proto, onnx_frontend._get_convert_map())
        if any(":" in b for b in bad):  # a custom domain: a user op (compiler.ops) is missing
            raise ModelError(
                f"{self.name}: unknown ONNX op(s) {', '.join(bad)}: no registered op maps them; "
                "load the plug-in that registers them (graphtune --plugin MODULE ...)"
            )
        if bad:
            raise ModelError(
                f"{self.name}: unsupported ONNX op(s) {', '.join(bad)}: "
                "rewrite them with supported ops or export with another opset"
            )

    # ---- compile ---------------------------------------------------------------------
    def compile(
        self,
        output_file: str | os.PathLike[str],
        schedule: GraphSchedule | Callable[..., Any] | None = None,
        target: Target | None = None,
        **config: Any,
    ) -> GraphSchedule:
        """Schedule, build and write a ``.stcobj`` artifact; returns the schedule used.

        ``schedule`` is a :class:`GraphSchedule`, a callable like
        ``resnet50_schedule(mod, batch)`` built from the manual primitives, or
        None: then the active dispatch contexts (``ApplyHistoryBest``) are asked,
        and otherwise the automatic level ``config["tb.graph_schedule_level"]``
        (default 3) is used.
        """
        from compiler._build import compile_model

        return compile_model(self, Path(output_file), schedule, target, config)


def _from_onnx(proto: onnx.ModelProto, shape_dict: Mapping[str, Sequence[int]],
               printed: io.StringIO) -> Any:
    from tvm.relax.frontend.onnx import from_onnx

    from compiler.ops import converters, prepare

    proto = prepare(proto)  # user ops (compiler.ops): claimed patterns, custom-domain nodes
    # The frontend warns about every renamed input and prints the failing node to stdout
    # before raising; the ModelError carries the message, the printout goes to the log.
    with warnings.catch_warnings(), contextlib.redirect_stdout(printed), converters():
        warnings.simplefilter("ignore")
        return from_onnx(proto, shape_dict=dict(shape_dict))


def load_onnx(path: str | os.PathLike[str], shape: Mapping[str, Sequence[int]] | None = None) -> Model:
    """Load an ONNX file into a :class:`Model` (``from_onnx`` in the guide).

    A ``.pt2`` file (``torch.export.save``) is refused here: ``compiler.load_pt2`` (or
    ``compiler.torch_import.load_model_file``, which takes either) loads it.

    Raises:
        ModelError: missing file, not ONNX, truncated, invalid, or unsupported op;
            a TorchScript, Keras or TensorFlow file (one line saying what is accepted).
    """
    import onnx

    p = Path(path)
    if not p.exists():
        raise ModelError(f"no such model file: {p}")
    if p.suffix.lower() == ".pt2":
        raise ModelError(f"{p} is a torch.export program: load it with compiler.load_pt2 "
                         "(every graphtune command takes it)")
    from compiler._formats import unsupported_format

    other = unsupported_format(p)
    if other is not None:
        raise ModelError(other)
    if p.is_dir():
        raise ModelError(f"{p} is a directory, not an ONNX file")
    try:
        proto = onnx.load(str(p))
    except Exception as exc:
        raise ModelError(f"{p} is not an ONNX model or is truncated ({type(exc).__name__})") from None
    if not proto.graph.node:
        raise ModelError(f"{p} is not an ONNX model or is truncated (no graph nodes)")
    try:
        onnx.checker.check_model(proto)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelError(f"{p} is not a valid ONNX model: {first}") from None
    return Model(proto, name=p.stem, shape=shape, path=str(p))


from_onnx = load_onnx


MAX_CONSTANT_ELEMENTS = 1 << 28
"""Largest tensor a node may make from constants (1 GiB in FP32; BERT-large's largest
activation at batch 64, seq 512 is this size). TVM's importer folds such nodes into
arrays, so a 200-byte file asking for 10^12 elements would otherwise exhaust memory."""

# onnx.TensorProto's integer types: UINT8, INT8, UINT16, INT16, INT32, INT64, UINT32, UINT64.
_INT_TYPES = frozenset({2, 3, 4, 5, 6, 7, 12, 13})
# Ops whose output size follows from a small constant input: op -> that input's index.
_SIZED_BY_CONSTANT = {"ConstantOfShape": 0, "Expand": 1, "Tile": 1}


def check_constant_sizes(proto: onnx.ModelProto, name: str) -> None:
    """Refuse a model whose constant-shaped nodes would make huge arrays at import.

    Raises:
        ModelError: A ``ConstantOfShape``, ``Expand``, ``Tile`` or ``Range``
            with constant inputs asks for more than :data:`MAX_CONSTANT_ELEMENTS`.
    """
    from onnx import numpy_helper

    small: dict[str, Any] = {}  # small integer constants by tensor name
    value = small.get
    for init in proto.graph.initializer:
        if init.data_type in _INT_TYPES and math.prod(init.dims) <= 16:
            small[init.name] = numpy_helper.to_array(init)
    for node in proto.graph.node:
        if node.op_type == "Constant":
            for attr in node.attribute:
                if attr.name == "value" and attr.t.data_type in _INT_TYPES \
                        and math.prod(attr.t.dims) <= 16:
                    small[node.output[0]] = numpy_helper.to_array(attr.t)
            continue
        elements: float | None = None
        if node.op_type in _SIZED_BY_CONSTANT and len(node.input) > _SIZED_BY_CONSTANT[node.op_type]:
            v = value(node.input[_SIZED_BY_CONSTANT[node.op_type]])
            if v is not None:
                elements = math.prod(float(max(int(d), 1)) for d in v.reshape(-1))
                if node.op_type == "Tile" and node.input[0] in small:
                    elements *= small[node.input[0]].size
        elif node.op_type == "Range" and len(node.input) == 3:
            start, limit, delta = (value(t) for t in node.input)
            if start is not None and limit is not None and delta is not None and delta.item():
                elements = max(0.0, math.ceil((float(limit.item()) - float(start.item()))
                                              / float(delta.item())))
        if elements is not None and elements > MAX_CONSTANT_ELEMENTS:
            raise ModelError(
                f"{name}: node {node.name or node.output[0]!r} ({node.op_type}) makes a tensor of "
                f"{elements:.3g} elements from constants, more than graphtune imports "
                f"({MAX_CONSTANT_ELEMENTS}): the file is damaged or not meant for an accelerator"
            )


def _onnx_shape(vi: Any) -> list[int]:
    dims = vi.type.tensor_type.shape.dim
    return [int(d.dim_value) if d.HasField("dim_value") else -1 for d in dims]


def _onnx_dtype(vi: Any) -> str:
    import onnx

    try:
        return str(onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type))
    except Exception:
        return "unknown"
