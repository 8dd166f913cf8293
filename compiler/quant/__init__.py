"""INT8 quantization: the TensorTurbo guide's ``quant_config``.

Calibration with onnxruntime's calibrators, a standard QDQ ONNX model with
power-of-two scales (:func:`quantize`), and the accuracy of the INT8 model
against the FP32 one on held-out samples. Needs the extra ``graphtune[quant]``.

Example:
    >>> from compiler.quant import QuantConfig, quantize
    >>> cfg = QuantConfig.from_dict({"calibration_set": "calib.npz"})
    >>> result = quantize(onnx.load("r50.onnx"), cfg)
    >>> onnx.save(result.model, "r50.int8.onnx"); print(result.accuracy.line())
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from compiler.quant._accuracy import AccuracyReport, compare, ort_runner
from compiler.quant._calib import calibration_set, check_against, load_npz, model_batch, split_held_out
from compiler.quant._config import CALIBRATE_MODES, QuantConfig, QuantError, check_presets
from compiler.quant._model import float_proto, quantize_model
from compiler.quant._pow2 import is_power2, power2, power2_scales
from compiler.quant._quantize import data_inputs, quantize_proto, require_onnxruntime

__all__ = [
    "CALIBRATE_MODES",
    "AccuracyReport",
    "QuantConfig",
    "QuantError",
    "Quantized",
    "calibration_set",
    "check_presets",
    "float_proto",
    "is_power2",
    "load_npz",
    "power2",
    "power2_scales",
    "quantize",
    "quantize_model",
    "require_onnxruntime",
]


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
