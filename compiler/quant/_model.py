"""A :class:`~compiler.model.Model` quantized by its ``quant_config`` (``compile``'s path)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from compiler.quant._accuracy import AccuracyReport
from compiler.quant._config import QuantConfig

if TYPE_CHECKING:
    from compiler.model import Model


def float_proto(model: Model) -> Any:
    """The model's ONNX proto as quantization needs it: current input shapes, weights as
    initializers (a zoo ``--weights inputs`` model's weights are generated here)."""
    import onnx
    from onnx import numpy_helper

    from compiler.model import WEIGHT_INPUTS_KEY

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
    from compiler.model import Model
    from compiler.quant import quantize

    cfg = quant_config if isinstance(quant_config, QuantConfig) else QuantConfig.from_dict(quant_config)
    result = quantize(float_proto(model), cfg)
    qmodel = Model(result.model, name=model.name, path=model.path)
    return qmodel, result.accuracy
