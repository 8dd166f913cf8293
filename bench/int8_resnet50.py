"""ResNet-50 batch 64 in INT8 against FP16 on the simulator (issue 27's acceptance).

Builds ResNet-50 from the zoo (batch 16, random weights), calibrates it on 64
zoo-generated images (4 batches; the last is held out for the accuracy report)
with ``percentile`` or ``kl_divergence``, quantizes it (power-of-two scales),
then simulates O3 at batch 64 for the FP32 model (planned in FP16) and the INT8
model and prints the throughputs, their ratio and what bounds each (busy cycles
of core 0's matrix and vector units, the DDR channel, against the latency).
``--tune N`` also tunes the INT8 model (``graphtune tune``, N measurements, one
worker) and reports the best against INT8 O3.

Run: ``.venv/bin/python bench/int8_resnet50.py [--out DIR] [--tune 400]``
(quantizing takes ~4 min and ~8.5 GB on 2 cores; a 400-trial tune ~15 min).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from compiler import zoo  # noqa: E402
from compiler.auto import graph_schedule_level  # noqa: E402
from compiler.model import Model  # noqa: E402
from compiler.quant import QuantConfig, quantize  # noqa: E402
from compiler.target import Target  # noqa: E402
from sim import SimResult, simulate  # noqa: E402

BATCH = 64


def bounds(r: SimResult) -> str:
    b = r.busy_cycles
    lat = r.latency_cycles
    parts = {"matrix": b["core0.mme"], "vector": b["core0.vme"], "DDR": b["ddr"], "LLB": b["llb"],
             "DMA": b["core0.dma"]}
    return ", ".join(f"{k} {v / lat:.0%}" for k, v in parts.items())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="bench_out/int8", help="Directory for the models and the log.")
    ap.add_argument("--calibrate", default="percentile", choices=["percentile", "kl_divergence"])
    ap.add_argument("--tune", type=int, default=0, help="Tune the INT8 model with this many trials.")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    fp_path, q_path = out / "r50.onnx", out / "r50.int8.onnx"
    proto = zoo.build("resnet50", batch=16, weights="random")
    onnx.save(proto, fp_path)
    feeds = [zoo.random_inputs(proto, seed=s) for s in range(4)]
    calib = {k: np.concatenate([f[k] for f in feeds]) for k in feeds[0]}
    t0 = time.perf_counter()
    result = quantize(proto, QuantConfig.from_dict({"calibration_set": calib,
                                                    "calibrate_mode": args.calibrate}))
    onnx.save(result.model, q_path)
    print(f"quantized in {time.perf_counter() - t0:.0f} s; {result.accuracy.line()}")
    target = Target.default()
    rows = {}
    for name, path in (("FP16", fp_path), ("INT8", q_path)):
        m = Model(onnx.load(path), name=name)
        m.set_batch(BATCH)
        g = m.graph
        r = simulate(g, graph_schedule_level(g, target, 3), target, timeline=False)
        assert isinstance(r, SimResult), r
        rows[name] = r
        print(f"{name} O3 batch {BATCH}: {r.chip_throughput_per_s:,.0f} img/s (chip), "
              f"{r.latency_us:,.0f} us, {r.latency_over_bound:.2f}x bound; busy: {bounds(r)}; "
              f"DDR {r.ddr_bytes / 1e6:.0f} MB, weights loaded {r.weight_bytes_loaded / 1e6:.0f} MB")
    ratio = rows["INT8"].throughput_per_s / rows["FP16"].throughput_per_s
    print(f"INT8 / FP16 O3 throughput: {ratio:.3f}x (acceptance: 1.4x to 2.0x)")
    if args.tune:
        log = out / "int8_tune.jsonl"
        cmd = [str(Path(sys.executable).parent / "graphtune"), "tune", str(q_path), "--batch", str(BATCH),
               "--trials", str(args.tune), "--workers", "1", "--seed", "0", "--log", str(log), "--json"]
        res = subprocess.run(cmd, capture_output=True, text=True, check=True)
        (task,) = json.loads(res.stdout.strip().splitlines()[-1])["tasks"]
        print(f"INT8 tune, {args.tune} trials: best {task['best_latency_us']:,.0f} us, "
              f"{task['speedup_over_O3']:.3f}x INT8 O3, {task['latency_over_bound']:.2f}x bound")


if __name__ == "__main__":
    main()
