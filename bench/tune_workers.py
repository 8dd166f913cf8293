"""Measurements per second with 1 and 2 Ray workers (and in-process for reference).

Two figures per worker count:

* pool: the measurer pool alone, fed pre-decoded candidates as fast as it takes
  them (what the workers can do);
* job: a whole ``tune`` run (the workers breed the guided sampler's rounds and
  measure; the driver asks, tells and writes the log).

Acceptance: with 2 workers on 2 cores, >= 1.6x the measurements/s of 1 worker.

On a shared machine wall-clock rates depend on the others' load, so each job also
reports its CPU time (driver process, and each worker's, from the first finished
batch to the last) and the rate those CPU times allow on ``--cores`` idle cores:
measurements / max(busiest process's CPU s, all CPU s / cores). That is what the
job would do on a quiet machine if nothing else limited it (Ray's messaging and
the driver's waits are in the CPU times; idle gaps are not).

Each job's CPU per measurement is split: the driver's main thread, its retrainings and the
rest of its process (``driver_ray``: Ray's threads and the study journal's writer, printed
apart), the workers' measure and breed calls and the rest of their processes (``w_other``:
Ray's call handling and threads, and the picks' texts, printed apart).

``--decoders`` instead runs the 2-worker job twice in one run, with the compiled search
core and with the Python decoder (``GRAPHTUNE_PURE_PYTHON=1``, inherited by the Ray
workers), and prints the ratio (issue 20: >= 5x on BERT-base s128 b8, >= 3x on ResNet-50
b16 at 400 trials). The goal compares decoders, so both jobs use the same simulator: the
compiled step (``sim/_csim.c``) unless ``GRAPHTUNE_PURE_SIM=1`` is set for the whole run
(then the Python step on both sides); the first line printed says which.
``--breed-budget X`` sets ``GuidedOptions.breed_budget`` (``inf``: the
fixed breeding effort; default: what ``tune`` uses).

Run: ``.venv/bin/python bench/tune_workers.py [--model resnet50] [--candidates 200]
[--trials 200] [--decoders] [--breed-budget X]``
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _tuning import MODELS, zoo_graph  # noqa: E402

from autotune import JobState, SimMeasurer, tune  # noqa: E402
from autotune import _tune as tune_mod  # noqa: E402
from autotune.running._gc_clock import GcClock  # noqa: E402
from autotune.running._pool import InProcessPool, MeasurePool  # noqa: E402
from autotune.running._ray_pool import RayPool  # noqa: E402
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


class CpuProbe:
    """A ``tune`` callback: CPU seconds of the driver and of each Ray worker over the run."""

    def __init__(self) -> None:
        self.pool: MeasurePool | None = None
        self.pids: list[int] = []
        self.first: tuple[float, int, float, dict[int, float]] | None = None
        self.last: tuple[float, int, float, dict[int, float]] | None = None
        # Where the CPU goes, at the first batch and at the end: the driver's main thread
        # and its retrainings (the rest of its process: Ray's threads), and the workers'
        # measure and breed calls (the rest: Ray's threads, unpickling the calls).
        self.split: list[dict[str, float]] = []
        self._sampler: object = None
        self._job: JobState | None = None
        self._gc = GcClock()  # the driver's collections (started with the first batch)
        self._procs: dict[int, Any] = {}  # psutil.Process per worker pid

    def _split(self) -> dict[str, float]:
        # "n": the measurements made by then, so the split is divided by the count over
        # its own span (first batch to the pool's close), not the callbacks' shorter one
        out = {"main": time.thread_time(),
               "fit": float(getattr(self._sampler, "fit_cpu_s", 0.0)),
               "n": float(self._job.measured_now if self._job is not None else 0),
               # candidates decoded by breeding, retrainings started: the search's effort
               "decoded": float(getattr(self._sampler, "decoded", 0)),
               "decoded_polish": float(getattr(self._sampler, "decoded_polish", 0)),
               "fits": float(getattr(self._sampler, "fits", 0)),
               "gc": self._gc.seconds, "gc_runs": float(self._gc.collections),
               "journal": journal_cpu()}
        if isinstance(self.pool, RayPool):
            for w in self.pool.worker_cpu():
                for k, v in w.items():
                    out[f"w_{k}"] = out.get(f"w_{k}", 0.0) + v
        return out

    def at_close(self) -> None:
        """Called by the bench before the pool closes: the end of the split."""
        if len(self.split) == 1:
            self.split.append(self._split())
        self._gc.stop()

    def capture(self, real: Any) -> Any:
        """``autotune._tune._pool`` that keeps the pool here (and the end of the split)."""
        def make(*args: object) -> MeasurePool:
            pool = self.pool = real(*args)
            close = pool.close

            def closing() -> None:
                self.at_close()
                close()

            pool.close = closing  # type: ignore[method-assign]
            return pool
        return make

    def _workers(self) -> dict[int, float]:
        import psutil

        out = {}
        for pid in self.pids:
            try:
                # one Process per pid: making one reads /proc again (58 against 25 µs a read,
                # on the driver's main thread, counted as the tune's: the probe's own cost)
                proc = self._procs.get(pid)
                if proc is None:
                    proc = self._procs[pid] = psutil.Process(pid)
                t = proc.cpu_times()
                out[pid] = t.user + t.system
            except psutil.NoSuchProcess:
                pass
        return out

    def __call__(self, job: JobState) -> None:
        if not self.pids and isinstance(self.pool, RayPool):
            self.pids = self.pool.worker_pids()
        self._job = job
        snap = (time.perf_counter(), job.measured_now, time.process_time(), self._workers())
        if self.first is None:
            self.first = snap
            self._gc.start()
            self._sampler = job.tasks[0].study.sampler
            self.split.append(self._split())
        self.last = snap

    def figures(self, cores: int) -> dict[str, float]:
        assert self.first is not None and self.last is not None
        n = self.last[1] - self.first[1]
        wall = self.last[0] - self.first[0]
        driver = self.last[2] - self.first[2]
        workers = [self.last[3][p] - self.first[3].get(p, 0.0) for p in self.last[3]]
        busiest = max([driver, *workers])
        total = driver + sum(workers)
        out = {"n": n, "wall_rate": n / wall, "driver_cpu": driver, "worker_cpu": sum(workers),
               "cpu_rate": n / max(busiest, total / cores)}
        if len(self.split) == 2:  # CPU seconds per part (the driver's over the same span)
            a, b = self.split
            d = {k: b[k] - a.get(k, 0.0) for k in b}
            inline = not getattr(getattr(self._sampler, "options", None), "background_fit", True)
            out.update({"split_n": d["n"], "driver_main": d["main"] - (d["fit"] if inline else 0.0),
                        "driver_fit": d["fit"],
                        "driver_ray": driver - d["main"] - (0.0 if inline else d["fit"]),
                        "w_measure": d.get("w_measure", 0.0), "w_breed": d.get("w_breed", 0.0),
                        "w_other": d.get("w_process", 0.0) - d.get("w_measure", 0.0)
                        - d.get("w_breed", 0.0),
                        # of driver_ray: the study journal's writer thread; of w_other: the
                        # picks' texts (made after breeding, read back before measuring)
                        "driver_journal": d["journal"], "w_text": d.get("w_text", 0.0),
                        # measured as the object their worker bred (Breeder.take)
                        "w_held": d.get("w_held", 0.0),
                        # batches sent again whole: a pick sent by id was not held (slim)
                        "resent": float(getattr(self.pool, "resent", 0)),
                        "decoded": d["decoded"], "decoded_polish": d["decoded_polish"],
                        "fits": d["fits"],
                        # the collector's CPU inside the parts above, and its collections
                        "driver_gc": d["gc"], "driver_gc_runs": d["gc_runs"],
                        "w_gc": d.get("w_gc", 0.0), "w_gc_runs": d.get("w_gc_runs", 0.0)})
        return out


def split_text(f: dict[str, float]) -> str:
    """CPU ms per measurement by part, as one line (empty without the split)."""
    if "w_measure" not in f:
        return ""
    n = f.get("split_n") or f["n"]
    parts = ("driver_main", "driver_fit", "driver_ray", "w_measure", "w_breed", "w_other")
    held = (f" (measured where bred: {100 * f.get('w_held', 0.0) / n:.0f} %, batches sent "
            f"again whole: {f.get('resent', 0.0):.0f})") if n else ""
    effort = (f"; decoded per measurement {f.get('decoded', 0.0) / n:.2f} (polish "
              f"{f.get('decoded_polish', 0.0) / n:.2f}), "
              f"{f.get('fits', 0.0):.0f} retrainings") if n else ""
    gcs = (f"; of it GC: driver {1e3 * f.get('driver_gc', 0.0) / n:.2f} "
           f"({f.get('driver_gc_runs', 0.0):.0f} collections), workers "
           f"{1e3 * f.get('w_gc', 0.0) / n:.2f} ({f.get('w_gc_runs', 0.0):.0f})") if n else ""
    inside = (f"; of driver_ray the journal writer {1e3 * f.get('driver_journal', 0.0) / n:.2f}, "
              f"of w_other the picks' texts {1e3 * f.get('w_text', 0.0) / n:.2f}") if n else ""
    return "; ".join(f"{p} {1e3 * f[p] / n:.2f}" for p in parts) + held + effort + gcs + inside


def journal_cpu() -> float:
    """CPU seconds of this process's study-journal writer threads so far (named ``journal
    ...``: ``autotune.running._journal.BufferedJournalFile``; 10 ms ticks of ``/proc``)."""
    import threading

    import psutil

    ids = {t.native_id for t in threading.enumerate() if t.name.startswith("journal ")}
    return sum(t.user_time + t.system_time for t in psutil.Process().threads() if t.id in ids)


def run_job(graph: object, trials: int, workers: int, cores: int,
            budget: float | None = None) -> tuple[float, dict[str, float]]:
    """A whole tune job: its measurements/s and its CPU figures."""
    from autotune import GuidedOptions, RunOptions, SearchOptions

    probe = CpuProbe()
    real = tune_mod._pool

    tune_mod._pool = probe.capture(real)  # type: ignore[assignment]
    try:
        with tempfile.TemporaryDirectory() as d:
            res = tune([graph], trials=trials, log=Path(d) / "w.jsonl",
                       search=SearchOptions(seed=0, guided=GuidedOptions(breed_budget=budget)),
                       run=RunOptions(workers=workers, curve=False, callbacks=[probe]))
    finally:
        tune_mod._pool = real
    return res.measurements_per_s, probe.figures(cores)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50", choices=sorted(MODELS))
    ap.add_argument("--candidates", type=int, default=200)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--cores", type=int, default=2, help="cores of the quiet machine the CPU "
                    "figures are computed for")
    ap.add_argument("--jobs-only", action="store_true", help="skip the pool figures")
    ap.add_argument("--decoders", action="store_true", help="2-worker jobs with the compiled "
                    "core and with the Python decoder, side by side")
    ap.add_argument("--breed-budget", type=float, default=None)
    args = ap.parse_args()
    print(f"start: load average {os.getloadavg()}", flush=True)
    graph = zoo_graph(args.model)
    if args.decoders:
        compare_decoders(graph, args.trials, args.cores, args.breed_budget)
        return
    target = Target.default()
    space = build_space(graph, target, graph.batch)
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    schedules = [space.sample(rng).to_json() for _ in range(args.candidates)]
    print(f"{args.model}: {args.candidates} random candidates decoded in "
          f"{time.perf_counter() - t0:.1f} s", flush=True)
    key = graph.workload_key
    rates: dict[str, float] = {}
    if not args.jobs_only:
        with InProcessPool({key: graph}, target, SimMeasurer()) as pool:
            rates["pool, in-process"] = pool_rate(pool, key, schedules, args.batch)
        for workers in (1, 2):
            with RayPool({key: graph}, target, SimMeasurer(), workers) as pool:
                rates[f"pool, {workers} worker(s)"] = pool_rate(pool, key, schedules, args.batch)
            print(f"pool, {workers} worker(s): {rates[f'pool, {workers} worker(s)']:.1f}/s "
                  f"(load {os.getloadavg()[0]:.1f})", flush=True)
    cpu: dict[int, dict[str, float]] = {}
    for workers in (1, 2):
        rate, cpu[workers] = run_job(graph, args.trials, workers, args.cores)
        rates[f"job, {workers} worker(s)"] = rate
        f = cpu[workers]
        print(f"job, {workers} worker(s): {rate:.1f}/s; from the first batch to the last: "
              f"{f['n']:.0f} measurements at {f['wall_rate']:.1f}/s, CPU s per measurement: "
              f"driver {f['driver_cpu'] / f['n']:.3f}, workers {f['worker_cpu'] / f['n']:.3f}; "
              f"CPU-time rate on {args.cores} idle cores {f['cpu_rate']:.1f}/s "
              f"(load {os.getloadavg()[0]:.1f})", flush=True)
    print(f"\nload average (1, 5, 15 min) at the end: {os.getloadavg()} on {os.cpu_count()} CPUs "
          "(other processes share the cores: the wall-clock ratios hold only on an idle machine)")
    for name, r in rates.items():
        print(f"{name:22} {r:8.1f} measurements/s")
    for kind in ("pool", "job"):
        if f"{kind}, 1 worker(s)" in rates:
            ratio = rates[f"{kind}, 2 worker(s)"] / rates[f"{kind}, 1 worker(s)"]
            print(f"{kind}: 2 workers / 1 worker = {ratio:.2f} (goal >= 1.6)")
    print(f"job, CPU-time rates: 2 workers / 1 worker = "
          f"{cpu[2]['cpu_rate'] / cpu[1]['cpu_rate']:.2f}; first-to-last-batch wall rates: "
          f"{cpu[2]['wall_rate'] / cpu[1]['wall_rate']:.2f}")


def compare_decoders(graph: object, trials: int, cores: int, budget: float | None) -> None:
    """The 2-worker job with the compiled core, then with the Python decoder, both with the
    same simulator (``GRAPHTUNE_PURE_SIM`` is left as the run was started)."""
    from sim import _ctime

    print("simulator on both sides: " + ("compiled step (sim._csim)" if _ctime.available()
                                          else "Python step (GRAPHTUNE_PURE_SIM or not built)"),
          flush=True)
    rows = {}
    for name in ("compiled", "python"):
        if name == "python":
            os.environ["GRAPHTUNE_PURE_PYTHON"] = "1"  # Ray's workers inherit it
        try:
            c0 = time.process_time()
            rate, f = run_job(graph, trials, 2, cores, budget)
        finally:
            os.environ.pop("GRAPHTUNE_PURE_PYTHON", None)
        rows[name] = (rate, f)
        print(f"{name}: job {rate:.1f}/s, steady {f['wall_rate']:.1f}/s over {f['n']:.0f}; CPU "
              f"ms per measurement: driver {1e3 * f['driver_cpu'] / f['n']:.1f}, workers "
              f"{1e3 * f['worker_cpu'] / f['n']:.1f}; CPU-time rate on {cores} idle cores "
              f"{f['cpu_rate']:.1f}/s; driver CPU {time.process_time() - c0:.1f} s; "
              f"load {os.getloadavg()[0]:.1f}", flush=True)
        print(f"  {name}: CPU ms per measurement: {split_text(f)}", flush=True)
    (rc, fc), (rp, fp) = rows["compiled"], rows["python"]
    print(f"compiled / python: job {rc / rp:.2f}x, steady {fc['wall_rate'] / fp['wall_rate']:.2f}x, "
          f"CPU-time rate {fc['cpu_rate'] / fp['cpu_rate']:.2f}x "
          f"({f'breed_budget {budget}' if budget is not None else f'screen {tune_mod.SCREEN:g}'})")


if __name__ == "__main__":
    main()
