"""Measurements per second with 1 and 2 Ray workers (and in-process for reference).

Two figures per worker count:

* pool: the measurer pool alone, fed pre-decoded candidates as fast as it takes
  them (what the workers can do);
* job: a whole ``tune`` run (the driver proposes, tells and writes the log while
  the workers measure).

Acceptance: with 2 workers on 2 cores, >= 1.6x the measurements/s of 1 worker.

Run: ``.venv/bin/python bench/tune_workers.py [--model resnet50] [--candidates 200]
[--trials 200]``
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _tuning import MODELS, zoo_graph  # noqa: E402

from autotune import SimMeasurer, tune  # noqa: E402
from autotune._pool import InProcessPool, MeasurePool  # noqa: E402
from autotune._ray_pool import RayPool  # noqa: E402
from compiler.target import Target  # noqa: E402
from search_space import build_space  # noqa: E402


def pool_rate(pool: MeasurePool, key: str, schedules: list[dict], batch: int) -> float:
    """Measurements per second of a pool kept full."""
    # Warm up every worker (actor start, graph arrival, the measurer's first imports): one
    # batch each, as submit gives a batch to the least-loaded worker. Warming only one left
    # the second worker's cold start inside the timed part.
    for w in range(pool.workers):
        pool.submit(-1 - w, key, schedules[:batch])
    while pool.in_flight:
        pool.wait(timeout_s=60)
    t0 = time.perf_counter()
    todo = [schedules[i:i + batch] for i in range(0, len(schedules), batch)]
    done = 0
    bid = 0
    while todo or pool.in_flight:
        while todo and pool.in_flight < pool.slots:
            pool.submit(bid, key, todo.pop())
            bid += 1
        for fin in pool.wait(timeout_s=60):
            done += len(fin.measurements)
    return done / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50", choices=sorted(MODELS))
    ap.add_argument("--candidates", type=int, default=200)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--trials", type=int, default=200)
    args = ap.parse_args()
    graph = zoo_graph(args.model)
    target = Target.default()
    space = build_space(graph, target, graph.batch)
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    schedules = [space.sample(rng).to_json() for _ in range(args.candidates)]
    print(f"{args.model}: {args.candidates} random candidates decoded in "
          f"{time.perf_counter() - t0:.1f} s", flush=True)
    key = graph.workload_key
    rates: dict[str, float] = {}
    with InProcessPool({key: graph}, target, SimMeasurer()) as pool:
        rates["pool, in-process"] = pool_rate(pool, key, schedules, args.batch)
    for workers in (1, 2):
        with RayPool({key: graph}, target, SimMeasurer(), workers) as pool:
            rates[f"pool, {workers} worker(s)"] = pool_rate(pool, key, schedules, args.batch)
        print(f"pool, {workers} worker(s): {rates[f'pool, {workers} worker(s)']:.1f}/s", flush=True)
    for workers in (1, 2):
        with tempfile.TemporaryDirectory() as d:
            res = tune([graph], trials=args.trials, workers=workers, log=Path(d) / "w.jsonl",
                       seed=0, curve=False)
        rates[f"job, {workers} worker(s)"] = res.measurements_per_s
        print(f"job, {workers} worker(s): {res.measurements_per_s:.1f}/s", flush=True)
    print(f"\nload average (1, 5, 15 min) at the end: {os.getloadavg()} on {os.cpu_count()} CPUs "
          "(other processes share the cores: the ratios hold only on an idle machine)")
    for name, r in rates.items():
        print(f"{name:22} {r:8.1f} measurements/s")
    for kind in ("pool", "job"):
        ratio = rates[f"{kind}, 2 worker(s)"] / rates[f"{kind}, 1 worker(s)"]
        print(f"{kind}: 2 workers / 1 worker = {ratio:.2f} (goal >= 1.6)")


if __name__ == "__main__":
    main()
