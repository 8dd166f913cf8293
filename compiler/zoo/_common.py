"""The graph builder every zoo model uses, weight specs and option parsing.

A model is a function ``(builder, batch, seq, options) -> None`` that calls
:class:`GraphBuilder` methods. The builder decides, from the weights mode, whether
a weight becomes an initializer (random or zero values) or a graph input, and it
records a :class:`WeightSpec` for every weight so that the exact random values of
an ``"inputs"``-mode model can be produced later without rebuilding them all.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

from compiler.errors import ModelError

OPSET = 17
IR_VERSION = 8
WEIGHT_MODES = ("random", "zeros", "inputs")
# In "inputs" mode, weights with more elements than this become graph inputs.
INPUT_THRESHOLD = 1024


@dataclass(frozen=True)
class WeightSpec:
    """How one float32 weight tensor is generated.

    Attributes:
        name: Tensor name.
        shape: Shape of the tensor in the model.
        kind: ``"normal"`` (N(0, ``std``)) or ``"uniform"`` (U[``low``, ``high``)).
        std: Standard deviation for ``"normal"``.
        low: Lower bound for ``"uniform"``.
        high: Upper bound for ``"uniform"``.
        zero_value: The constant used in ``"zeros"`` mode (1.0 for BatchNorm var).
        source_shape: When set, the values are drawn for this larger shape and the
            leading ``prod(shape)`` values are kept (a position table sliced to seq),
            so a shorter sequence sees a prefix of the same table.
    """

    name: str
    shape: tuple[int, ...]
    kind: str
    std: float = 0.0
    low: float = 0.0
    high: float = 0.0
    zero_value: float = 0.0
    source_shape: tuple[int, ...] | None = None

    @property
    def size(self) -> int:
        """Number of elements in the tensor."""
        return math.prod(self.shape)


@dataclass(frozen=True)
class DataSpec:
    """How :func:`compiler.zoo.random_inputs` fills one data input.

    Attributes:
        name: Graph input name.
        kind: ``"normal"`` (float N(0, 1)), ``"uniform"`` (float U[0, 1)) or
            ``"index"`` (int64 in [0, ``high``)).
        high: Exclusive upper bound for ``"index"``.
    """

    name: str
    kind: str
    high: int = 0


def _weight_rng(seed: int, name: str) -> np.random.Generator:
    # One stream per (seed, tensor name): any weight can be regenerated alone,
    # which keeps "inputs"-mode builds fast and materialize_weights exact.
    digest = hashlib.sha256(name.encode("utf-8")).digest()
    key = tuple(int.from_bytes(digest[i : i + 4], "little") for i in range(0, 16, 4))
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=key))


def generate_weight(spec: WeightSpec, seed: int) -> np.ndarray:
    """Draw the random values of one weight.

    Args:
        spec: The weight to draw.
        seed: The model seed.

    Returns:
        A float32 array of ``spec.shape``; the same for the same (spec, seed).
    """
    rng = _weight_rng(seed, spec.name)
    count = math.prod(spec.source_shape) if spec.source_shape is not None else spec.size
    if spec.kind == "normal":
        values = rng.standard_normal(count, dtype=np.float32)
        values *= np.float32(spec.std)
    elif spec.kind == "uniform":
        values = rng.random(count, dtype=np.float32)
        values *= np.float32(spec.high - spec.low)
        values += np.float32(spec.low)
    else:  # pragma: no cover - specs are written by the zoo itself
        raise ValueError(f"unknown weight kind {spec.kind!r}")
    return values[: spec.size].reshape(spec.shape)


_ONNX_TYPES = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64}


class GraphBuilder:
    """Accumulates nodes, tensors and weights of one ONNX graph.

    Every node name and every tensor name must be unique; a clash is a bug in a
    model function and raises ``ValueError``.

    Args:
        weights: ``"random"``, ``"zeros"`` or ``"inputs"``.
        seed: Seed of the random weights.
    """

    def __init__(self, weights: str, seed: int) -> None:
        self.weights = weights
        self.seed = seed
        self.weight_specs: dict[str, WeightSpec] = {}
        self.weight_input_names: list[str] = []
        self.data_specs: list[DataSpec] = []
        # Nodes and initializers go straight into the proto: copying hundreds of MB
        # of weights through make_graph/make_model would double the build time.
        self._model = onnx.ModelProto()
        self._graph = self._model.graph
        self._data_inputs: list[onnx.ValueInfoProto] = []
        self._weight_inputs: list[onnx.ValueInfoProto] = []
        self._outputs: list[onnx.ValueInfoProto] = []
        self._tensors: set[str] = set()
        self._node_names: set[str] = set()

    def _claim(self, name: str) -> None:
        if name in self._tensors:
            raise ValueError(f"duplicate tensor name {name!r}")
        self._tensors.add(name)

    def data_input(
        self, name: str, shape: Sequence[int], dtype: type[np.generic], spec: DataSpec
    ) -> str:
        """Declare a data input (batch in dim 0) and how to fill it with random data."""
        self._claim(name)
        elem = _ONNX_TYPES[np.dtype(dtype)]
        self._data_inputs.append(helper.make_tensor_value_info(name, elem, list(shape)))
        self.data_specs.append(spec)
        return name

    def weight(
        self,
        name: str,
        shape: Sequence[int],
        *,
        std: float | None = None,
        low: float | None = None,
        high: float | None = None,
        zero_value: float = 0.0,
        source_shape: Sequence[int] | None = None,
    ) -> str:
        """Declare a float32 weight: N(0, ``std``) or U[``low``, ``high``) when random.

        Returns:
            The tensor name, for use as a node input.
        """
        self._claim(name)
        source = tuple(source_shape) if source_shape is not None else None
        if std is not None:
            spec = WeightSpec(name, tuple(shape), "normal", std=std, zero_value=zero_value,
                              source_shape=source)
        elif low is not None and high is not None:
            spec = WeightSpec(name, tuple(shape), "uniform", low=low, high=high,
                              zero_value=zero_value, source_shape=source)
        else:  # pragma: no cover - model functions always pass one of the two
            raise ValueError(f"weight {name!r} needs std or low/high")
        self.weight_specs[name] = spec
        if self.weights == "inputs" and spec.size > INPUT_THRESHOLD:
            self.weight_input_names.append(name)
            self._weight_inputs.append(
                helper.make_tensor_value_info(name, TensorProto.FLOAT, list(spec.shape))
            )
        elif self.weights == "zeros":
            self._initializer(name, np.full(spec.shape, spec.zero_value, dtype=np.float32))
        else:
            self._initializer(name, generate_weight(spec, self.seed))
        return name

    def _initializer(self, name: str, array: np.ndarray) -> None:
        tensor = self._graph.initializer.add()
        tensor.name = name
        tensor.data_type = _ONNX_TYPES[array.dtype]
        tensor.dims.extend(array.shape)
        little = array.dtype.newbyteorder("<")
        tensor.raw_data = np.ascontiguousarray(array, dtype=little).tobytes()

    def const(self, name: str, value: np.ndarray | Sequence[int] | float) -> str:
        """Declare a constant initializer (shape targets, scalars); same in every mode.

        Python floats become float32 scalars, int sequences int64 vectors.
        """
        self._claim(name)
        if isinstance(value, float):
            array = np.array(value, dtype=np.float32)
        elif isinstance(value, np.ndarray):
            array = value
        else:
            array = np.array(list(value), dtype=np.int64)
        self._initializer(name, array)
        return name

    def op(
        self,
        op_type: str,
        name: str,
        inputs: Sequence[str],
        *,
        output: str | None = None,
        **attrs: Any,
    ) -> str:
        """Append a node with one output, named ``output`` or else after the node.

        Returns:
            The output tensor name.
        """
        if name in self._node_names:
            raise ValueError(f"duplicate node name {name!r}")
        self._node_names.add(name)
        out = name if output is None else output
        self._claim(out)
        self._graph.node.append(helper.make_node(op_type, list(inputs), [out], name=name, **attrs))
        return out

    def output(self, name: str, shape: Sequence[int], dtype: type[np.generic] = np.float32) -> None:
        """Mark tensor ``name`` as a graph output of the given shape."""
        elem = _ONNX_TYPES[np.dtype(dtype)]
        self._outputs.append(helper.make_tensor_value_info(name, elem, list(shape)))

    def to_model(self, graph_name: str, doc: str, metadata: Mapping[str, str]) -> onnx.ModelProto:
        """Assemble the model (opset 17, IR version 8) with the given metadata.

        The builder is spent afterwards: the returned proto is its own.
        """
        model, graph = self._model, self._graph
        graph.name = graph_name
        graph.doc_string = doc
        graph.input.extend(self._data_inputs + self._weight_inputs)
        graph.output.extend(self._outputs)
        model.ir_version = IR_VERSION
        model.opset_import.append(helper.make_opsetid("", OPSET))
        model.producer_name = "graphtune.zoo"
        model.producer_version = "1"
        helper.set_model_props(model, dict(metadata))
        return model


# ---------------------------------------------------------------- options


@dataclass(frozen=True)
class IntOption:
    """An integer option with a lower bound."""

    default: int
    minimum: int = 1

    def parse(self, value: object) -> int:
        """Return ``value`` as an int or raise ``ValueError`` describing valid values."""
        if isinstance(value, bool) or not isinstance(value, Integral) or value < self.minimum:
            raise ValueError(f"an integer >= {self.minimum}")
        return int(value)

    def to_json(self, value: object) -> object:
        """The JSON form of a parsed value."""
        return value


@dataclass(frozen=True)
class IntListOption:
    """A non-empty list of integers, each at least ``minimum``."""

    default: tuple[int, ...]
    minimum: int = 1

    def parse(self, value: object) -> tuple[int, ...]:
        """Return ``value`` as a tuple of ints or raise ``ValueError``."""
        what = f"a non-empty list of integers >= {self.minimum}"
        if not isinstance(value, list | tuple) or not value:
            raise ValueError(what)
        items = []
        for item in value:
            if isinstance(item, bool) or not isinstance(item, Integral) or item < self.minimum:
                raise ValueError(what)
            items.append(int(item))
        return tuple(items)

    def to_json(self, value: object) -> object:
        """The JSON form of a parsed value."""
        assert isinstance(value, tuple)
        return list(value)


Option = IntOption | IntListOption
ModelFn = Callable[[GraphBuilder, int, int, Mapping[str, Any]], None]


@dataclass(frozen=True)
class ModelDef:
    """One zoo model: its name, description, options and graph function."""

    name: str
    description: str
    options: Mapping[str, Option]
    fn: ModelFn


def model_error(message: str) -> ModelError:
    """A :class:`ModelError` with a one-line message."""
    return ModelError(" ".join(message.split()))
