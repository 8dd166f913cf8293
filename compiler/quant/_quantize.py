"""Calibrate and quantize an ONNX model to a QDQ model with onnxruntime.

onnxruntime's calibrators give the activation ranges (``percentile``:
``CalibrationMethod.Percentile``; ``kl_divergence``: ``CalibrationMethod.Entropy``),
``quantize_static`` writes the standard QDQ model (INT8 activations and weights,
symmetric, weights per output channel, biases kept in FP32), and
:func:`compiler.quant._pow2.power2_scales` makes every scale a power of two and
applies the presets. onnxruntime is the optional extra ``graphtune[quant]``.
"""

from __future__ import annotations

import contextlib
import io
import logging
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from compiler.quant._calib import CalibrationSet, batches, check_against, model_batch
from compiler.quant._config import QuantConfig, QuantError
from compiler.quant._pow2 import check_preset_layers, power2_scales

log = logging.getLogger(__name__)
HISTOGRAM_BINS = 2048
PERCENTILE = 99.999  # onnxruntime's default

# Ops whose inputs and outputs are quantized; the rest (softmax, reshape on shapes...)
# stay in FP32 between DequantizeLinear and QuantizeLinear.
QUANT_OPS = ("Conv", "Gemm", "MatMul", "Add", "Relu", "MaxPool", "GlobalAveragePool",
             "AveragePool", "Concat", "Flatten", "Reshape", "Transpose", "Clip", "Mul")


def require_onnxruntime() -> Any:
    """``onnxruntime.quantization``, or a one-line QuantError naming the extra."""
    try:
        import onnxruntime.quantization as q
    except ImportError:
        raise QuantError("quantization needs onnxruntime: pip install 'graphtune[quant]'") from None
    return q


def data_inputs(proto: Any) -> dict[str, dict[str, Any]]:
    """``{name: {"shape": [...], "dtype": str}}`` of the graph inputs that are not initializers."""
    import onnx

    inits = {i.name for i in proto.graph.initializer}
    out = {}
    for vi in proto.graph.input:
        if vi.name in inits:
            continue
        dims = vi.type.tensor_type.shape.dim
        shape = [int(d.dim_value) if d.HasField("dim_value") else -1 for d in dims]
        dtype = str(onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type))
        out[vi.name] = {"shape": shape, "dtype": dtype}
    return out


class _Reader:
    """onnxruntime's ``CalibrationDataReader`` protocol over fixed batches."""

    def __init__(self, data: Mapping[str, np.ndarray], batch: int) -> None:
        self._feeds: Iterator[dict[str, np.ndarray]] = batches(data, batch)

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._feeds, None)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """onnxruntime's quantizer prints progress to stdout and warns on the root logger:
    both go to this module's logger at DEBUG."""
    printed = io.StringIO()
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(printed):
            yield
    finally:
        root.setLevel(level)
        for line in printed.getvalue().splitlines():
            log.debug("onnxruntime: %s", line)


def quantize_proto(proto: Any, config: QuantConfig, data: CalibrationSet | None = None) -> Any:
    """The QDQ model of ``proto`` calibrated on ``data`` (default: the config's set).

    Args:
        proto: The FP32 ``onnx.ModelProto`` (static shapes; weights as initializers).
        config: The checked ``quant_config``.
        data: The samples to calibrate on (a part of the set, for a held-out report).

    Returns:
        The QDQ ``onnx.ModelProto`` with power-of-two scales and the presets.

    Raises:
        QuantError: a bad calibration set, no onnxruntime, or a failed quantization.
    """
    import onnx

    q = require_onnxruntime()
    inputs = data_inputs(proto)
    check_against(config.calibration_set, inputs)
    check_preset_layers(proto, config.preset_scale)
    feed: Mapping[str, np.ndarray] = config.calibration_set if data is None else data
    method = (q.CalibrationMethod.Entropy if config.calibrate_mode == "kl_divergence"
              else q.CalibrationMethod.Percentile)
    extra = {"ActivationSymmetric": True, "WeightSymmetric": True, "QuantizeBias": False}
    with tempfile.TemporaryDirectory(prefix="graphtune-quant-") as tmp:
        src = Path(tmp) / "model.onnx"
        dst = Path(tmp) / "model.qdq.onnx"
        cache = Path(tmp) / "ranges.json"
        onnx.save(proto, str(src))
        try:
            with _quiet():
                # The calibrator runs here, not inside quantize_static, which cannot set
                # the histogram sizes: KL divergence needs far more bins than the 128
                # quantized levels it searches over (TensorRT's 2048), or its only
                # candidate threshold is the maximum.
                cal = q.create_calibrator(
                    src, list(QUANT_OPS), augmented_model_path=str(Path(tmp) / "augmented.onnx"),
                    calibrate_method=method,
                    extra_options={"symmetric": True, "num_bins": HISTOGRAM_BINS,
                                   "num_quantized_bins": 128, "percentile": PERCENTILE})
                cal.collect_data(_Reader(feed, model_batch(inputs)))
                q.save_tensors_data(cal.compute_data(), cache)
                del cal
                q.quantize_static(
                    str(src), str(dst), None, quant_format=q.QuantFormat.QDQ, per_channel=True,
                    activation_type=q.QuantType.QInt8, weight_type=q.QuantType.QInt8,
                    op_types_to_quantize=list(QUANT_OPS), calibrate_method=method,
                    extra_options=extra, calibration_cache_path=str(cache),
                )
        except Exception as exc:
            text = str(exc).strip().splitlines()
            raise QuantError(f"onnxruntime could not quantize the model: "
                             f"{text[-1] if text else type(exc).__name__}") from None
        qdq = onnx.load(str(dst))
    out = power2_scales(qdq, config.preset_scale, float_model=proto)
    log.info("quantized %s with %s calibration (%d samples)", proto.graph.name or "model",
             config.calibrate_mode, next(iter(feed.values())).shape[0])
    return out
