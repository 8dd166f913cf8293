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

from compiler.quant._accuracy import AccuracyReport
from compiler.quant._calib import calibration_set, load_npz
from compiler.quant._config import CALIBRATE_MODES, QuantConfig, QuantError, check_presets
from compiler.quant._model import Quantized, float_proto, quantize, quantize_model
from compiler.quant._pow2 import is_power2, power2, power2_scales
from compiler.quant._quantize import require_onnxruntime

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
