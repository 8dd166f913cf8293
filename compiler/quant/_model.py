"""A :class:`~compiler.model.Model` quantized by its ``quant_config`` (``compile``'s path)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from compiler.quant._accuracy import AccuracyReport, compare, ort_runner
from compiler.quant._calib import check_against, model_batch, split_held_out
from compiler.quant._config import QuantConfig
from compiler.quant._quantize import data_inputs, quantize_proto, require_onnxruntime

# ``model`` is a compiler.model.Model, typed Any: compiler.model imports the build that
# calls this module, and importing it back would close a circle (ARCHITECTURE.md)
Model = Any


def float_proto(model: Model) -> Any:
    """The model's ONNX proto as quantization needs it: current input shapes, weights as
    initializers (a zoo ``--weights inputs`` model's weights are generated here)."""
    import onnx
    from onnx import numpy_helper

    from compiler._model_like import WEIGHT_INPUTS_KEY

    proto = onnx.ModelProto()
    proto.CopyFrom(model.proto)
    info = model.get_input_info()
    weights = model.weights
    keep = []
    for vi in proto.graph.input:
        if vi.name in weights:
            proto.graph.initializer.append(numpy_helper.from_array(weights[vi.name], vi.name))
            continue
        if vi.name in info:
            dims = vi.type.tensor_type.shape.dim
            for d, v in zip(dims, info[vi.name]["shape"]):
                d.ClearField("dim_param")
                d.dim_value = int(v)
        keep.append(vi)
    del proto.graph.input[:]
    proto.graph.input.extend(keep)
    for out in proto.graph.output:  # shapes follow the (new) batch: let ORT infer them
        out.type.tensor_type.ClearField("shape")
    meta = [p for p in proto.metadata_props if p.key != WEIGHT_INPUTS_KEY]
    del proto.metadata_props[:]
    proto.metadata_props.extend(meta)
    return proto


def quantize_model(model: Model, quant_config: QuantConfig | Mapping[str, Any]
                   ) -> tuple[Model, AccuracyReport]:
    """The QDQ model of ``model`` (same name, path and input shapes) and its accuracy.

    Raises:
        QuantError: a bad ``quant_config`` or calibration set (before anything is
            written), no onnxruntime.
    """

    cfg = quant_config if isinstance(quant_config, QuantConfig) else QuantConfig.from_dict(quant_config)
    result = quantize(float_proto(model), cfg)
    qmodel = type(model)(result.model, name=model.name, path=model.path)  # a Model, as given
    return qmodel, result.accuracy


@dataclass(frozen=True)
class Quantized:
    """A QDQ model and how close it stays to the FP32 model on held-out samples."""

    model: Any
    accuracy: AccuracyReport


def quantize(proto: Any, config: QuantConfig) -> Quantized:
    """Calibrate on all but a held-out quarter of the set, quantize, and report accuracy.

    The held-out part is the last quarter of the whole batches (nothing is held
    out when the set is one batch; the report says so).

    Raises:
        QuantError: a bad calibration set (checked before anything runs), no
            onnxruntime, a preset naming no layer.
    """
    require_onnxruntime()
    inputs = data_inputs(proto)
    check_against(config.calibration_set, inputs)
    batch = model_batch(inputs)
    calib, held = split_held_out(config.calibration_set, batch)
    qdq = quantize_proto(proto, config, calib)
    same = next(iter(calib.values())) is next(iter(held.values()))
    report = compare(ort_runner(proto), ort_runner(qdq), held, batch, held_out=not same)
    return Quantized(qdq, report)
