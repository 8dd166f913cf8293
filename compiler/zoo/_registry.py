"""The zoo's public functions: build, list, and the weight/data helpers."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from numbers import Integral
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto

from compiler.zoo import _bert, _cnn, _gpt, _recsys, _vit
from compiler.zoo._common import (
    WEIGHT_MODES,
    GraphBuilder,
    ModelDef,
    generate_weight,
    model_error,
)

ZOO_KEY = "graphtune.zoo"
WEIGHT_INPUTS_KEY = "graphtune.weight_inputs"

_MODELS: dict[str, ModelDef] = {
    m.name: m for m in _cnn.MODELS + _bert.MODELS + _recsys.MODELS + _vit.MODELS + _gpt.MODELS
}


@dataclass(frozen=True)
class ZooEntry:
    """One model of the zoo, as listed by :func:`list_models`.

    Attributes:
        name: The name to pass to :func:`build`.
        description: One line: architecture, inputs and outputs.
        options: Option name -> default value (a fresh dict per call).
    """

    name: str
    description: str
    options: dict[str, Any] = field(default_factory=dict, hash=False)


def list_models() -> list[ZooEntry]:
    """All zoo models.

    Returns:
        One :class:`ZooEntry` per model, sorted by name; options map to JSON-ready
        defaults (lists, not tuples).
    """
    return [
        ZooEntry(m.name, m.description, {k: o.to_json(o.default) for k, o in m.options.items()})
        for m in sorted(_MODELS.values(), key=lambda m: m.name)
    ]


def _int_arg(what: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral) or value < minimum:
        raise model_error(f"{what} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _resolve(name: str, options: Mapping[str, Any]) -> tuple[ModelDef, dict[str, Any]]:
    model = _MODELS.get(name)
    if model is None:
        raise model_error(f"unknown model {name!r}; valid models: {', '.join(sorted(_MODELS))}")
    resolved: dict[str, Any] = {}
    for key, value in options.items():
        if key not in model.options:
            valid = ", ".join(model.options) or "none"
            raise model_error(f"unknown option {key!r} for model {name!r}; valid options: {valid}")
        try:
            resolved[key] = model.options[key].parse(value)
        except ValueError as err:
            raise model_error(f"option {key!r} of model {name!r} must be {err}, got {value!r}") \
                from None
    for key, option in model.options.items():
        resolved.setdefault(key, option.default)
    return model, {k: resolved[k] for k in model.options}


def _build(
    name: str, batch: int, seq: int, weights: str, seed: int, options: Mapping[str, Any]
) -> tuple[onnx.ModelProto, GraphBuilder]:
    batch = _int_arg("batch", batch, 1)
    seq = _int_arg("seq", seq, 1)
    seed = _int_arg("seed", seed, 0)
    if weights not in WEIGHT_MODES:
        choices = ", ".join(repr(m) for m in WEIGHT_MODES)
        raise model_error(f"weights must be one of {choices}, got {weights!r}")
    model_def, opts = _resolve(name, options)
    b = GraphBuilder(weights, seed)
    model_def.fn(b, batch, seq, opts)
    args = {
        "name": name,
        "batch": batch,
        "seq": seq,
        "seed": seed,
        "weights": weights,
        "options": {k: model_def.options[k].to_json(v) for k, v in opts.items()},
    }
    metadata = {
        ZOO_KEY: json.dumps(args, sort_keys=True, separators=(",", ":")),
        WEIGHT_INPUTS_KEY: ",".join(b.weight_input_names),
    }
    return b.to_model(name, model_def.description, metadata), b


def build(
    name: str,
    *,
    batch: int = 1,
    seq: int = 128,
    weights: str = "random",
    seed: int = 0,
    **options: Any,
) -> onnx.ModelProto:
    """Build a zoo model as an ONNX ModelProto (opset 17, float32, fixed shapes).

    The same arguments always give a byte-identical ``SerializeToString()``.

    Args:
        name: A model name from :func:`list_models`.
        batch: Batch size, dim 0 of every data input and output.
        seq: Sequence length (BERT and GPT only; at most their ``max_positions``).
        weights: ``"random"`` (seeded, He-style scaled), ``"zeros"`` (BatchNorm var 1)
            or ``"inputs"`` (every weight of more than 1024 elements becomes a graph
            input without initializer; see :func:`materialize_weights`).
        seed: Seed of the random weights (>= 0).
        **options: Model options, e.g. ``image_size=64`` or ``num_layers=2``; see
            :func:`list_models` for each model's options and defaults.

    Returns:
        The model, with the build arguments in ``metadata_props["graphtune.zoo"]``
        (JSON) and the weight inputs in ``metadata_props["graphtune.weight_inputs"]``.

    Raises:
        ModelError: Unknown model or option, or an invalid value.

    Example:
        >>> m = build("bert_base", batch=4, seq=256, weights="inputs")
        >>> feeds = {**random_inputs(m), **materialize_weights(m)}
    """
    return _build(name, batch, seq, weights, seed, options)[0]


def _metadata(model: onnx.ModelProto) -> dict[str, str]:
    return {p.key: p.value for p in model.metadata_props}


def weight_input_names(model: onnx.ModelProto) -> list[str]:
    """Names of the graph inputs that hold weights.

    Args:
        model: A model from :func:`build`.

    Returns:
        The names recorded under ``metadata_props["graphtune.weight_inputs"]``, in
        graph order; [] unless the model was built with ``weights="inputs"``.
    """
    names = _metadata(model).get(WEIGHT_INPUTS_KEY, "")
    return names.split(",") if names else []


def data_input_names(model: onnx.ModelProto) -> list[str]:
    """Graph inputs that carry data (batch in dim 0).

    Args:
        model: Any ONNX model; zoo metadata is used when present.

    Returns:
        Input names that are neither weight inputs nor initializers, in graph order.
    """
    skip = set(weight_input_names(model)) | {t.name for t in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in skip]


def _rebuild(model: onnx.ModelProto) -> GraphBuilder | None:
    """Rebuild a zoo model's structure from its metadata (cheap: "inputs" mode)."""
    text = _metadata(model).get(ZOO_KEY)
    if text is None:
        return None
    try:
        args = json.loads(text)
        _, builder = _build(args["name"], args["batch"], args["seq"], "inputs", args["seed"],
                            args["options"])
    except (ValueError, KeyError, TypeError) as err:
        raise model_error(f"metadata {ZOO_KEY!r} is not a valid zoo build record: {err}") from None
    return builder


def materialize_weights(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """The arrays of an "inputs"-mode model's weight inputs.

    They are bit-identical to the initializers that ``weights="random"`` gives for
    the same name, batch, seq, seed and options, so feeding them reproduces the
    random-weights model exactly.

    Args:
        model: A model from :func:`build` (its metadata is read; nothing else).

    Returns:
        Weight input name -> float32 array ({} for a model without weight inputs).

    Raises:
        ModelError: The model lists weight inputs but has no zoo build record, or
            its weight inputs no longer match that record.
    """
    names = weight_input_names(model)
    if not names:
        return {}
    builder = _rebuild(model)
    if builder is None:
        raise model_error(f"model has weight inputs but no {ZOO_KEY!r} metadata; "
                          "only zoo models can be materialized")
    shapes = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim]
              for i in model.graph.input}
    out: dict[str, np.ndarray] = {}
    for name in names:
        spec = builder.weight_specs.get(name)
        if spec is None or shapes.get(name) != list(spec.shape):
            raise model_error(f"weight input {name!r} does not match the zoo build record; "
                              "rebuild the model instead of editing it")
        out[name] = generate_weight(spec, builder.seed)
    return out


def random_inputs(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    """Valid random data for the data inputs of a model.

    Zoo models get in-range data: token ids below the vocabulary, DeepFM indices below
    feature_size, images N(0, 1), DeepFM values U[0, 1). Other models get N(0, 1) for
    float inputs.

    Args:
        model: The model whose :func:`data_input_names` to fill.
        seed: Seed of the data.

    Returns:
        Input name -> array of the input's shape and dtype.

    Raises:
        ModelError: A non-zoo model has a non-float input (its valid range is unknown).
    """
    rng = np.random.default_rng(seed)
    builder = _rebuild(model)
    specs = {s.name: s for s in builder.data_specs} if builder is not None else {}
    by_name = {i.name: i for i in model.graph.input}
    out: dict[str, np.ndarray] = {}
    for name in data_input_names(model):
        tensor_type = by_name[name].type.tensor_type
        shape = tuple(d.dim_value for d in tensor_type.shape.dim)
        spec = specs.get(name)
        if spec is not None and spec.kind == "index":
            out[name] = rng.integers(0, spec.high, size=shape, dtype=np.int64)
        elif spec is not None and spec.kind == "uniform":
            out[name] = rng.random(shape, dtype=np.float32)
        elif spec is not None or tensor_type.elem_type == TensorProto.FLOAT:
            out[name] = rng.standard_normal(shape, dtype=np.float32)
        else:
            raise model_error(f"input {name!r} is not float and the model has no {ZOO_KEY!r} "
                              "metadata; supply its data yourself")
    return out
