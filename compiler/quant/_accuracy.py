"""How far the INT8 model's outputs are from the FP32 model's, on held-out samples."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from compiler.quant._calib import batches

Runner = Callable[[dict[str, np.ndarray]], list[np.ndarray]]


@dataclass(frozen=True)
class AccuracyReport:
    """INT8 vs FP32 on ``samples`` samples of the first output.

    ``top1_agreement`` is the fraction of samples whose arg-max class is the same
    (None when the output is not ``[N, classes]``). ``held_out`` is False when the
    set had one batch only, so the samples were also calibrated on.
    """

    samples: int
    held_out: bool
    max_abs_error: float
    mean_abs_error: float
    top1_agreement: float | None

    def to_json(self) -> dict[str, Any]:
        """The report as a JSON object."""
        return {"samples": self.samples, "held_out": self.held_out,
                "max_abs_error": self.max_abs_error, "mean_abs_error": self.mean_abs_error,
                "top1_agreement": self.top1_agreement}

    def line(self) -> str:
        """One human-readable line."""
        top = "" if self.top1_agreement is None else f", top-1 agreement {self.top1_agreement:.2%}"
        where = "held-out" if self.held_out else "calibration (nothing held out)"
        return (f"INT8 vs FP32 on {self.samples} {where} samples: max |error| {self.max_abs_error:.4g}, "
                f"mean |error| {self.mean_abs_error:.4g}{top}")


def compare(fp32: Runner, int8: Runner, data: Mapping[str, np.ndarray], batch: int,
            held_out: bool = True) -> AccuracyReport:
    """Run both models batch by batch on ``data`` and compare their first outputs."""
    ref, got = [], []
    for feed in batches(data, batch):
        ref.append(np.asarray(fp32(feed)[0], dtype=np.float64))
        got.append(np.asarray(int8(feed)[0], dtype=np.float64))
    a, b = np.concatenate(ref), np.concatenate(got)
    err = np.abs(a - b)
    top1 = None
    if a.ndim == 2 and a.shape[1] > 1:
        top1 = float(np.mean(a.argmax(1) == b.argmax(1)))
    return AccuracyReport(int(a.shape[0]), held_out, float(err.max()), float(err.mean()), top1)


def ort_runner(proto: Any) -> Runner:
    """A function running ``proto`` in onnxruntime's CPU provider."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return lambda feed: sess.run(None, feed)
