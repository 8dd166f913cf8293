"""Before/after of the two worked examples: sub-functions, simulated latency, output error.

Run from the repository root::

    .venv/bin/python examples/custom_ops/before_after.py

For each example it builds the model twice, with the op written in standard
ONNX ops (before) and as the custom-domain op with the plug-in loaded (after),
and prints the NPU sub-function count and CPU ops, the simulated latency of
the automatic level O3 on the STCP920 simulator, and the largest difference
of the compiled artifact's output (O3) from the NumPy reference.

Printed on 2026-11-26 (batch 64, 512 features)::

    model            NPU subfns          CPU ops  O3 latency µs  max |err|
    RMSNorm before            2            power          70.81   3.81e-06
    Swish before              1                -          61.77   2.38e-06
    RMSNorm after             1                -          61.81   4.29e-06
    Swish after               1                -          61.77   2.38e-06
    Swish pattern             1                -          61.77   2.38e-06

Written with standard ops, RMSNorm's ``Pow`` is a CPU op: the NPU graph splits
in two and the simulator prices the op as a host segment (its input and output
over PCIe and the host's compute, ``sim/_host.py``), 9.0 µs of the 70.81. As the
custom op it stays on the NPU, where its vector work overlaps the two MatMuls'
weight loads (1 MiB from DDR, which bound the step): 61.81 µs, one sub-function.
Swish was already all NPU ops, so its rows do not move.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent


def measure(proto: Any, reference: Any, x: np.ndarray, tmp: Path, tag: str) -> dict[str, Any]:
    """Sub-functions, CPU ops, O3 latency (µs) and compiled-output error of one model."""
    import onnx

    from compiler import Executor, Target, load_onnx
    from compiler.auto import graph_schedule_level
    from sim import simulate

    path = tmp / f"{tag}.onnx"
    onnx.save(proto, str(path))
    model = load_onnx(path)
    graph = model.graph
    target = Target.default()
    schedule = graph_schedule_level(graph, target, 3)
    result = simulate(graph, schedule, target, timeline=False)
    artifact = tmp / f"{tag}.stcobj"
    model.compile(artifact, schedule=schedule)
    (out,) = Executor.load(artifact).run({"x": x})
    return {
        "subfunctions": len(graph.npu_subfunctions()),
        "cpu_ops": [op.op_type for op in graph.cpu_ops()],
        "latency_us": getattr(result, "latency_us", float("nan")),
        "max_abs_error": float(np.abs(out - reference).max()),
    }


def run(batch: int = 8, d: int = 192) -> dict[str, dict[str, Any]]:
    """Both examples, before and after (what this script prints), at ``batch`` x ``d``."""
    sys.path.insert(0, str(HERE))
    import models

    from compiler.ops import load_plugins

    x = np.random.default_rng(7).standard_normal((batch, d)).astype(np.float32)
    out: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        ref = models.rmsnorm_reference(x, batch, d)
        out["RMSNorm before"] = measure(models.rmsnorm_mlp(batch, d, custom=False), ref, x, tmp,
                                        "rms_before")
        ref_s = models.swish_reference(x, batch, d)
        out["Swish before"] = measure(models.swish_mlp(batch, d, custom=False), ref_s, x, tmp,
                                      "swish_before")
        load_plugins([str(HERE / "rmsnorm.py"), str(HERE / "swish.py")], entry_points=False)
        out["RMSNorm after"] = measure(models.rmsnorm_mlp(batch, d), ref, x, tmp, "rms_after")
        out["Swish after"] = measure(models.swish_mlp(batch, d), ref_s, x, tmp, "swish_after")
        out["Swish pattern"] = measure(models.swish_mlp(batch, d, custom=False), ref_s, x, tmp,
                                       "swish_pattern")
    return out


def main() -> None:
    rows = run(64, 512)
    print(f"{'model':16} {'NPU subfns':>10} {'CPU ops':>16} {'O3 latency µs':>14} {'max |err|':>10}")
    for k, r in rows.items():
        cpu = ",".join(r["cpu_ops"]) or "-"
        print(f"{k:16} {r['subfunctions']:>10} {cpu:>16} {r['latency_us']:>14.2f} "
              f"{r['max_abs_error']:>10.2e}")


if __name__ == "__main__":
    main()
