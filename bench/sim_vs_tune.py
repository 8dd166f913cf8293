"""The simulator alone vs a 2-worker tune: does the search keep up with the simulator?

Issue 20's acceptance: on a one-block GPT-2-style decoder (the zoo's ``gpt`` with one
layer, batch 4) a 2-worker ``tune``'s steady-state measurements/s must reach >= 0.5x
the rate at which the simulator alone evaluates sampled candidates in one process;
the same ratio is reported for ResNet-50 b16 and BERT-base s128 b8.

Per model, in one run:

* **sim**: one process, ``--candidates`` candidates sampled from the space first, then
  simulated one after another (``SimMeasurer.measure``): candidates/s (wall) and per CPU
  second. ``sample+sim`` also counts the sampling (decode + pre-check). The default
  count, 2,000, is large enough that the collector's full (generation-2) collections,
  ~180 ms each on gpt1 and about one per 400 candidates with CPython's thresholds, are
  averaged in: with 200 candidates one landed in the timed block or not, and gpt1's
  simulator rate moved between ~320 and ~710/s on the same code (2026-11-27, the lead).
* **tune**: ``tune(workers=2, trials=--trials, seed=0)`` (guided sampler, Ray on
  loopback): measurements/s from the first finished batch to the last (the steady
  state: Ray's start and the seeds' first batch excluded; the task is kept from stopping
  at its lower bound), and the CPU seconds per
  measurement of the driver and of the workers over the same span (psutil), with the
  rate those CPU times allow on ``--cores`` idle cores (as ``bench/tune_workers.py``).

Ratio = tune steady-state rate / sim rate (wall, both measured under the same load;
the CPU-time ratio beside it). Adds a dated section at the top of ``--out`` (default
``bench/results/sim_vs_tune.md``), keeping the earlier runs.

Run: ``.venv/bin/python bench/sim_vs_tune.py [--models gpt1,resnet50,bert_base]
[--candidates 2000] [--trials 300]``
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tune_workers import CpuProbe, split_text  # noqa: E402

from autotune import SimMeasurer, tune  # noqa: E402
from autotune import _tune as tune_mod  # noqa: E402
from compiler import zoo  # noqa: E402
from compiler.graph import Graph  # noqa: E402
from compiler.model import Model  # noqa: E402
from compiler.target import Target  # noqa: E402
from search_space import build_space  # noqa: E402

MODELS: dict[str, tuple[str, int, dict[str, int]]] = {
    "gpt1": ("gpt", 4, {"num_layers": 1}),
    "resnet50": ("resnet50", 16, {}),
    "bert_base": ("bert_base", 8, {"seq": 128}),
}


def graph_of(key: str) -> Graph:
    name, batch, opts = MODELS[key]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Model(zoo.build(name, batch=batch, weights="inputs", **opts), name=key).graph


def sim_rate(graph: Graph, target: Target, n: int) -> dict[str, float]:
    """Candidates/s of sampling, and of simulating, in this process (after a warm-up)."""
    space = build_space(graph, target, graph.batch)
    meas = SimMeasurer()
    rng = np.random.default_rng(0)
    meas.measure(graph, [space.sample(rng) for _ in range(10)], target, None)  # warm-up
    w0, c0 = time.perf_counter(), time.process_time()
    schedules = [space.sample(rng) for _ in range(n)]
    w1, c1 = time.perf_counter(), time.process_time()
    ok = sum(m.ok for m in meas.measure(graph, schedules, target, None))
    w2, c2 = time.perf_counter(), time.process_time()
    return {"sample_wall": n / (w1 - w0), "sample_cpu": n / (c1 - c0),
            "sim_wall": n / (w2 - w1), "sim_cpu": n / (c2 - c1),
            "sample_sim_wall": n / (w2 - w0), "sample_sim_cpu": n / (c2 - c0), "ok": ok / n}


def tune_rate(graph: Graph, trials: int, workers: int, cores: int,
              budget: float | None = None) -> dict[str, float]:
    """A tune's steady-state figures; the task does not stop at its lower bound (gpt1's
    search reaches it within ten measurements: there would be no steady state)."""
    from autotune import GuidedOptions, RunOptions, SearchOptions
    from autotune.job import _scheduler

    probe = CpuProbe()
    real = tune_mod._pool
    record = _scheduler.GradientScheduler.record

    def unbounded(self: _scheduler.GradientScheduler, task: int, latency_us: float | None
                  ) -> None:
        self.tasks[task].lower_bound_us = 0.0
        record(self, task, latency_us)

    tune_mod._pool = probe.capture(real)  # type: ignore[assignment]
    _scheduler.GradientScheduler.record = unbounded  # type: ignore[method-assign]
    try:
        with tempfile.TemporaryDirectory() as d:
            tune([graph], trials=trials, log=Path(d) / "t.jsonl",
                 search=SearchOptions(seed=0, guided=GuidedOptions(breed_budget=budget)),
                 run=RunOptions(workers=workers, curve=False, callbacks=[probe]))
    finally:
        tune_mod._pool = real
        _scheduler.GradientScheduler.record = record  # type: ignore[method-assign]
    return probe.figures(cores)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--models", default="gpt1,resnet50,bert_base")
    ap.add_argument("--candidates", type=int, default=2000)
    ap.add_argument("--trials", type=int, default=300)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--budgets", default="default", help="comma-separated "
                    "GuidedOptions.breed_budget values, one tune each (inf: the fixed "
                    "breeding effort; default: what tune uses)")
    ap.add_argument("--out", type=Path,
                    default=Path(__file__).resolve().parent / "results" / "sim_vs_tune.md")
    args = ap.parse_args(argv)
    target = Target.default()
    rows = []
    for key in args.models.split(","):
        graph = graph_of(key)
        sim = sim_rate(graph, target, args.candidates)
        load_sim = os.getloadavg()[0]
        print(f"{key}: sim {sim['sim_wall']:.0f}/s ({sim['sim_cpu']:.0f} per CPU s), sample "
              f"{sim['sample_wall']:.0f}/s, sample+sim {sim['sample_sim_wall']:.0f}/s; "
              f"load {load_sim:.1f}", flush=True)
        for b in args.budgets.split(","):
            budget = None if b == "default" else float(b)
            job = tune_rate(graph, args.trials, args.workers, args.cores, budget)
            load_job = os.getloadavg()[0]
            what = f"breed_budget {b}" if budget is not None else "screen, tune's default"
            print(f"{key} ({what}): tune {job['wall_rate']:.1f}/s steady "
                  f"({job['n']:.0f} measurements); CPU ms/measurement driver "
                  f"{1e3 * job['driver_cpu'] / job['n']:.1f}, workers "
                  f"{1e3 * job['worker_cpu'] / job['n']:.1f}; CPU-time rate on {args.cores} "
                  f"idle cores {job['cpu_rate']:.1f}/s; ratio "
                  f"{job['wall_rate'] / sim['sim_wall']:.2f}; load {load_job:.1f}", flush=True)
            print(f"  CPU ms per measurement: {split_text(job)}", flush=True)
            rows.append((f"{key} ({b})" if b != "default" else key, sim, job, load_sim, load_job))
    title = "# The simulator alone vs a 2-worker tune (issue 20)"
    lines = [f"## {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", "",
             f"`bench/sim_vs_tune.py --candidates {args.candidates} --trials {args.trials}`, "
             f"{os.cpu_count()} cores shared with other jobs (load average, 1 min, beside "
             "each figure). sim: sampled candidates simulated one after another in one "
             "process (sampling not counted; `sample+sim` counts it). tune: "
             f"`tune(workers={args.workers}, seed=0)` with the guided sampler, steady state "
             "(first finished batch to last). Goal: tune / sim >= 0.5 on gpt1.", "",
             "| model | sim /s (wall) | sim /s per CPU s | sample+sim /s | load | tune /s "
             "(steady, wall) | driver CPU ms/meas. | workers CPU ms/meas. | tune /s on "
             f"{args.cores} idle cores (CPU) | load | tune / sim (wall) | tune / sim (CPU) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for key, sim, job, ls, lj in rows:
        n = job["n"]
        lines.append(
            f"| {key} | {sim['sim_wall']:.0f} | {sim['sim_cpu']:.0f} | "
            f"{sim['sample_sim_wall']:.0f} | {ls:.1f} | {job['wall_rate']:.1f} | "
            f"{1e3 * job['driver_cpu'] / n:.1f} | {1e3 * job['worker_cpu'] / n:.1f} | "
            f"{job['cpu_rate']:.1f} | {lj:.1f} | {job['wall_rate'] / sim['sim_wall']:.2f} | "
            f"{job['cpu_rate'] / sim['sim_cpu']:.2f} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    # a new dated section under the title; the earlier runs below it are kept
    before = args.out.read_text().split("\n") if args.out.exists() else [title]
    rest = before[1:] if before and before[0] == title else before
    args.out.write_text("\n".join([title, "", *lines, "", *rest]).rstrip("\n") + "\n")
    print(f"wrote {args.out} (a new section at the top)")


if __name__ == "__main__":
    main()
