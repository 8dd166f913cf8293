"""Driver scale: measurements/s on 1..64 Ray workers, and the driver's own time per trial.

Two parts, both tuning tiny_cnn (batch 4: 130 free parameters, cheap to simulate) with
:class:`autotune.DelayedMeasurer`:

1. **Workers.** For each worker count W, a tuning job whose measurer takes ``--delay``
   seconds per measurement (200 ms, like compiling and running on a board), on Ray
   actors that reserve 0.01 CPU each (they sleep), ``--slots`` workers to a process (the
   measurer's ``slots_per_process``: a measurer that only waits runs several workers'
   measurements as threads of one process; 1 = a process per worker). Reports measurements/s over the
   steady part of the job (first finished batch to last), the ideal W / delay, the
   efficiency (achieved / ideal; goal >= 80 % at 64 workers) and the driver's busy
   time per measurement (wall time not spent blocked in ``ray.wait``).
2. **Driver time with a large study.** A study is filled with ``--study-trials``
   trials (random sampler, no delay, in-process), then the guided tuner resumes it
   for ``--guided-trials`` more, in-process; its time per trial excluding the
   measurements themselves and the breeding (an in-process pool breeds when the driver
   submits a breeding request: with Ray workers that is the workers' work; reported in
   its own column) is split into: the ask (the next bred proposal made a trial), the
   breeding request, learning from told trials and retraining (``sync``), the look for
   enqueued trials, tell, the log write and the storage flush. Goal: <= 5 ms per trial
   with 10,000 trials in the study. The same is measured at a small study for
   comparison (does anything grow with the study?).

Writes ``driver_scale.md``, ``driver_scale.csv`` and ``driver_scale.png`` to ``--out``
(default ``bench/results``) and prints the load average beside the numbers: on a
shared machine the absolute figures move with it.

Run: ``.venv/bin/python bench/driver_scale.py`` (full: about 20-30 min on 2 cores)
or ``--quick`` (1, 2, 4 workers, small study; about 2-3 min). Filling a 10,000-trial
study takes ~10 min: ``--study-dir DIR`` keeps it for the next run (which resumes a
copy); ``--profile FILE`` writes a cProfile of the resumed part; ``--keep-workers`` /
``--keep-driver`` re-run one part and keep the other's rows from ``OUT``'s CSV.
"""

from __future__ import annotations

import argparse
import collections
import csv
import functools
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import warnings  # noqa: E402

from autotune import DelayedMeasurer, JobState, tune  # noqa: E402
from autotune.running._pool import MeasurePool  # noqa: E402
from compiler import zoo  # noqa: E402
from compiler.graph import Graph  # noqa: E402
from compiler.model import Model  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def tiny_graph() -> Graph:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Model(zoo.build("tiny_cnn", batch=4, weights="inputs"), name="tiny_cnn").graph


def load() -> str:
    a, b, c = os.getloadavg()
    return f"{a:.2f} {b:.2f} {c:.2f}"


# ---- timing the pool from the driver's side -----------------------------------------------------
class TimedPool(MeasurePool):
    """A pool that counts the driver's time spent blocked on it (wait) or measuring (in-process)."""

    def __init__(self, inner: MeasurePool, in_process: bool, slots: int | None = None) -> None:
        self.inner = inner
        self.in_process = in_process
        self._slots = slots
        self.blocked_s = 0.0
        self.blocked_cpu_s = 0.0  # this thread's CPU time inside the same calls
        self.flight: list[int] = []  # jobs in flight (batches and breeding) at each wait
        self.breeding: list[int] = []  # ... of which breeding requests (a Ray pool's)
        self.breed_s = 0.0  # time in submit_breed (an in-process pool breeds there)
        self.breed_cpu_s = 0.0
        self.workers = inner.workers
        self.remote = inner.remote
        self.probe: CpuSplit | None = None

    @property
    def slots(self) -> int:  # type: ignore[override]
        return self._slots or self.inner.slots

    @property
    def in_flight(self) -> int:
        return self.inner.in_flight

    def submit(self, batch_id: int, task_key: str, schedules: Any,
               cids: Any = None, vectors: Any = None) -> None:
        if self.probe is not None and not self.probe.marks:
            self.probe.mark(self.inner)  # the actors have started: the split begins
        t0, c0 = time.perf_counter(), time.thread_time()
        if vectors is None:  # (a tree without vectors: the same bench runs on it)
            self.inner.submit(batch_id, task_key, schedules, cids)
        else:
            self.inner.submit(batch_id, task_key, schedules, cids, vectors=vectors)
        if self.in_process:  # the in-process pool measures here: not the driver's own work
            self.blocked_s += time.perf_counter() - t0
            self.blocked_cpu_s += time.thread_time() - c0

    def submit_breed(self, batch_id: int, task_key: str, request: Any, scorer: Any) -> None:
        # An in-process pool breeds here: the work Ray workers do for a remote driver, timed
        # apart (not blocked, not the driver's own loop either).
        t0, c0 = time.perf_counter(), time.thread_time()
        self.inner.submit_breed(batch_id, task_key, request, scorer)
        self.breed_s += time.perf_counter() - t0
        self.breed_cpu_s += time.thread_time() - c0

    def wait(self, timeout_s: float | None = None) -> list[Any]:
        self.flight.append(self.inner.in_flight)
        self.breeding.append(sum(getattr(self.inner, "_breeds", ())))
        t0, c0 = time.perf_counter(), time.thread_time()
        try:
            return self.inner.wait(timeout_s)
        finally:
            self.blocked_s += time.perf_counter() - t0
            self.blocked_cpu_s += time.thread_time() - c0

    def close(self) -> None:
        if self.probe is not None and len(self.probe.marks) == 1:
            self.probe.mark(self.inner)  # before the actors stop: the split ends
        self.inner.close()


class CpuSplit:
    """CPU seconds by part, marked when the first batch is sent (the actors have started)
    and before the pool closes; :meth:`per_measurement` divides the difference.

    Parts: the workers' ``measure`` and ``breed`` calls (their own accounting,
    ``RayPool.worker_cpu``) and the rest of the actor processes (Ray's threads, idle
    actors, unpickling); Ray's services (every other process under this one: raylet,
    GCS, Ray's helper processes); this process's main thread (the driver's loop and its
    Ray client calls), its cost-model retraining (``GuidedSampler.fit_cpu_s``) and its
    other threads (Ray's client threads).
    """

    def __init__(self) -> None:
        self.marks: list[dict[str, float]] = []
        self.sampler: Any = None
        self.measured: Callable[[], int] = lambda: 0
        self._pids: list[int] | None = None

    def mark(self, pool: Any) -> None:
        import psutil

        if self._pids is None:
            self._pids = list(pool.worker_pids()) if hasattr(pool, "worker_pids") else []
        out = {"n": float(self.measured()), "process": time.process_time(),
               "main": time.thread_time(),
               "fit": float(getattr(self.sampler, "fit_cpu_s", 0.0))}
        if hasattr(pool, "worker_cpu"):
            for w in pool.worker_cpu():
                for k, v in w.items():
                    out[f"w_{k}"] = out.get(f"w_{k}", 0.0) + v
        actors = set(self._pids)
        services = 0.0
        for child in psutil.Process().children(recursive=True):
            try:
                if child.pid not in actors:
                    t = child.cpu_times()
                    services += t.user + t.system
            except psutil.NoSuchProcess:
                pass
        out["services"] = services
        self.marks.append(out)

    def per_measurement(self) -> dict[str, float]:
        """CPU ms per measurement by part (empty unless both marks were taken)."""
        if len(self.marks) != 2:
            return {}
        a, b = self.marks
        d = {k: b[k] - a.get(k, 0.0) for k in b}
        n = max(d["n"], 1.0)
        parts = {
            "worker measure": d.get("w_measure", 0.0),
            "worker breed": d.get("w_breed", 0.0),
            "worker Ray + idle": d.get("w_process", 0.0) - d.get("w_measure", 0.0)
            - d.get("w_breed", 0.0),
            "Ray services": d["services"],
            "driver main thread": d["main"],
            "driver retraining": d["fit"],
            "driver other threads": d["process"] - d["main"] - d["fit"],
        }
        out = {k: 1e3 * v / n for k, v in parts.items()}
        out["total"] = sum(out.values())
        out["measurements"] = d["n"]
        # measured as the object the same worker bred (no JSON parse, validation or
        # memory plan again: Breeder.take)
        out["held %"] = 100 * d.get("w_held", 0.0) / n
        # decoded again from its space vector on the worker that measured it (not parsed)
        out["rebuilt %"] = 100 * d.get("w_rebuilt", 0.0) / n
        return out


@contextmanager
def timed_pools(slots: int | None = None,
                probe: CpuSplit | None = None) -> Iterator[list[TimedPool]]:
    """Wrap every pool ``tune`` builds in a :class:`TimedPool` (the list collects them).

    ``slots`` makes the driver keep that many batches in flight (an in-process pool then
    looks, to the driver, like a Ray pool of ``slots / 2`` workers).
    """
    from autotune import _tune

    made: list[TimedPool] = []
    real = _tune._pool

    def wrapped(job: Any, target: Any, measurer: Any, workers: int, *args: Any) -> MeasurePool:
        pool = TimedPool(real(job, target, measurer, workers, *args), in_process=workers == 0,
                         slots=slots)
        pool.probe = probe
        if probe is not None:
            probe.sampler = job.tasks[0].study.sampler
            probe.measured = lambda: job.measured_now
        made.append(pool)
        return pool

    _tune._pool = wrapped  # type: ignore[assignment]
    try:
        yield made
    finally:
        _tune._pool = real


@dataclass
class Spent:
    """Wall time per label, the duration of each label's first call, and CPU time per label.

    CPU time is the calling thread's (``time.thread_time``): on a busy machine the wall
    time includes waiting for a core, the CPU time does not.
    """

    total: collections.Counter[str] = field(default_factory=collections.Counter)
    first: dict[str, float] = field(default_factory=dict)
    cpu: collections.Counter[str] = field(default_factory=collections.Counter)
    first_cpu: dict[str, float] = field(default_factory=dict)
    process_cpu: collections.Counter[str] = field(default_factory=collections.Counter)


@contextmanager
def stopwatch(spots: dict[str, tuple[Any, str]]) -> Iterator[Spent]:
    """Accumulate wall time spent in the named methods (``label -> (owner, method name)``).

    Nested spots count in both (``ask`` includes ``refill``).
    """
    spent = Spent()
    saved = []
    for label, (owner, name) in spots.items():
        f = getattr(owner, name)
        saved.append((owner, name, f))

        def make(f: Callable[..., Any], label: str) -> Callable[..., Any]:
            @functools.wraps(f)
            def timed(*a: Any, **k: Any) -> Any:
                t0, c0, p0 = time.perf_counter(), time.thread_time(), time.process_time()
                try:
                    return f(*a, **k)
                finally:
                    dt, dc = time.perf_counter() - t0, time.thread_time() - c0
                    spent.process_cpu[label] += time.process_time() - p0
                    spent.total[label] += dt
                    spent.first.setdefault(label, dt)
                    spent.cpu[label] += dc
                    spent.first_cpu.setdefault(label, dc)
            return timed

        setattr(owner, name, make(f, label))
    try:
        yield spent
    finally:
        for owner, name, f in saved:
            setattr(owner, name, f)


# ---- part 1: workers ----------------------------------------------------------------------------
@dataclass
class ScaleRow:
    workers: int
    measured: int
    seconds: float
    rate: float
    ideal: float
    efficiency: float
    driver_ms: float
    driver_cpu_ms: float
    load: str = ""
    load_before: str = ""
    split: dict[str, float] = field(default_factory=dict)  # CPU ms per measurement by part
    best_us: float | None = None  # the best latency found (what the search found, not speed)
    # jobs in flight (batches and breeding requests) when the driver waited, the median of
    # the middle half of the run: near 2 x workers, the workers are fed (the limit is CPU)
    in_flight: float | None = None
    breeding: float | None = None  # breeding requests out, the same way
    slots: int = 1  # workers to a Ray actor process (the measurer's slots_per_process)


@dataclass
class _Clock:
    points: list[tuple[float, int]] = field(default_factory=list)

    def __call__(self, job: JobState) -> None:
        self.points.append((time.perf_counter(), job.measured_now))


def scale_point(graph: Graph, workers: int, delay: float, batches_per_worker: int,
                batch_size: int, seed: int, workdir: str, slots: int = 1) -> ScaleRow:
    clock = _Clock()
    trials = workers * batch_size * batches_per_worker
    measurer = DelayedMeasurer(delay_s=delay, num_cpus=0.01, slots_per_process=slots)
    from autotune.running._driver import Driver

    before = load()
    probe = CpuSplit()
    with timed_pools(probe=probe) as pools, stopwatch({"run": (Driver, "run")}) as spent:
        res = tune([graph], trials=trials, workers=workers,
                   log=os.path.join(workdir, f"w{workers}.jsonl"), seed=seed, measurer=measurer,
                   batch_size=batch_size, curve=False, callbacks=[clock])
    (pool,) = pools
    (t0, n0), (t1, n1) = clock.points[0], clock.points[-1]
    seconds = t1 - t0
    rate = (n1 - n0) / seconds if seconds > 0 else float("nan")
    ideal = workers / delay
    # The driver's busy time: its loop's wall time minus what it spent blocked on the pool.
    busy = spent.total["run"] - pool.blocked_s
    busy_cpu = spent.cpu["run"] - pool.blocked_cpu_s
    return ScaleRow(workers, n1, seconds, rate, ideal, rate / ideal, 1e3 * busy / max(n1, 1),
                    1e3 * busy_cpu / max(n1, 1), load(), before, probe.per_measurement(),
                    res.tasks[0].best_latency_us, _middle_median(pool.flight),
                    _middle_median(pool.breeding), slots)


def _middle_median(xs: list[int]) -> float | None:
    """The median of the middle half of ``xs`` (the steady part of a run)."""
    mid = sorted(xs[len(xs) // 4: 3 * len(xs) // 4])
    return float(mid[len(mid) // 2]) if mid else None


# ---- part 2: driver time with a large study -----------------------------------------------------
@dataclass
class DriverRow:
    study_trials: int
    new_trials: int
    start_s: float  # reading the log, replaying the study, the first sync
    first_sync_s: float
    per_trial_ms: float  # the driver's own work: without breeding (Ray workers breed)
    per_trial_cpu_ms: float
    other_cpu_ms: float  # other threads (background retraining), per trial
    breed_cpu_ms: float  # breeding, done in-process here (by the workers with Ray)
    farm: int
    parts_ms: dict[str, float]
    load: str = ""


def driver_point(graph: Graph, study_trials: int, new_trials: int, seed: int, workdir: str,
                 log_name: str, farm_workers: int, profile: str | None = None,
                 resume_on_copy: bool = False) -> DriverRow:
    """The guided driver's time per trial on a study of (at least) ``study_trials`` trials.

    The study is filled (or topped up: the log is reused) by the random sampler; the
    guided tuner then runs ``new_trials`` more in-process, shaped like the driver of a
    ``farm_workers``-worker Ray pool: that many batches in flight (2 per worker) and the
    cost model retrained on a thread, as ``tune`` does with Ray workers.
    """
    from autotune import GuidedOptions
    from autotune.running import _journal
    from autotune.running._driver import Driver
    from autotune.sampling import _guided
    from logs import RecordWriter

    log = os.path.join(workdir, log_name)
    t0 = time.perf_counter()
    # Unseeded: a seeded random sampler resumed on its own log proposes its first run's
    # candidates again (all measured), and the job stops after 64 of them.
    filled = tune([graph], trials=study_trials, workers=0, log=log, seed=None, sampler="random",
                  measurer=DelayedMeasurer(delay_s=0.0), curve=False).total
    if resume_on_copy:  # a kept study stays its size: the resumed part runs on a copy
        import shutil

        from autotune.running._journal import journal_path_for

        copy = os.path.join(workdir, f"resumed-{study_trials}.jsonl")
        shutil.copyfile(log, copy)
        shutil.copyfile(journal_path_for(log), journal_path_for(copy))
        log = copy
    fill_s = time.perf_counter() - t0
    print(f"  study filled to {filled} trials in {fill_s:.0f} s (random sampler)", flush=True)
    study_trials = filled
    spots = {
        "run": (Driver, "run"),
        "ask": (Driver, "_ask"),
        "breed request": (Driver, "_breed"),
        "sampler sync (learn + retrain)": (_guided.GuidedSampler, "sync"),
        "waiting scan": (Driver, "_waiting"),
        "tell": (Driver, "_tell"),
        "log write": (RecordWriter, "write"),
        "storage flush": (_journal.StorageHandle, "flush"),
    }
    prof = None
    if profile:
        import cProfile

        prof = cProfile.Profile()
    with timed_pools(2 * farm_workers) as pools, stopwatch(spots) as spent:
        t0 = time.perf_counter()
        if prof is not None:
            prof.enable()
        res = tune([graph], trials=study_trials + new_trials, workers=0, log=log, seed=seed,
                   measurer=DelayedMeasurer(delay_s=0.0), curve=False,
                   guided=GuidedOptions(background_fit=True))
        if prof is not None:
            prof.disable()
        wall = time.perf_counter() - t0
    if prof is not None:
        prof.dump_stats(f"{profile}.{study_trials}")
        print(f"  profile: {profile}.{study_trials}", flush=True)
    # CPU of the other threads during the loop: the cost model's background retraining.
    other_cpu = spent.process_cpu["run"] - spent.cpu["run"]
    (pool,) = pools
    new = max(res.total - study_trials, 1)
    # The loop's time minus the measurements, minus the first sync (learning the whole
    # study once and training on it: a cost a long job pays once, reported apart).
    sync = "sampler sync (learn + retrain)"
    first_sync = spent.first.get(sync, 0.0)
    first_sync_cpu = spent.first_cpu.get(sync, 0.0)
    loop_s = spent.total.pop("run") - pool.blocked_s - pool.breed_s - first_sync
    loop_cpu = spent.cpu.pop("run") - pool.blocked_cpu_s - pool.breed_cpu_s - first_sync_cpu
    spent.cpu[sync] -= first_sync_cpu
    # the first sync ran inside the first breeding request (or ask); the breeding itself
    # inside the request (an in-process pool breeds on submit)
    first = "breed request" if spent.first.get("breed request") else "ask"
    spent.cpu[first] -= first_sync_cpu
    spent.cpu["breed request"] -= pool.breed_cpu_s
    parts = {k: 1e3 * spent.cpu[k] / new for k in spots if k != "run"}
    return DriverRow(study_trials, new, wall - loop_s - pool.blocked_s - pool.breed_s, first_sync,
                     1e3 * loop_s / new, 1e3 * loop_cpu / new, 1e3 * other_cpu / new,
                     1e3 * pool.breed_cpu_s / new, farm_workers, parts, load())


# ---- output ------------------------------------------------------------------------------------
def write_results(out: Path, rows: list[ScaleRow], drivers: list[DriverRow], delay: float,
                  quick: bool) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "driver_scale.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["part", "workers", "study_trials", "measured", "seconds", "measurements_per_s",
                    "ideal_per_s", "efficiency", "driver_ms_per_trial", "driver_cpu_ms_per_trial",
                    "background_cpu_ms_per_trial", "start_s", "first_sync_s", "load_avg_1_5_15",
                    "breeding_cpu_ms_per_trial", "parts_cpu_ms_per_trial", "load_before",
                    "cpu_split_ms_per_measurement", "slots_per_process"])
        for r in rows:
            w.writerow(["workers", r.workers, "", r.measured, f"{r.seconds:.2f}", f"{r.rate:.2f}",
                        f"{r.ideal:.2f}", f"{r.efficiency:.3f}", f"{r.driver_ms:.2f}",
                        f"{r.driver_cpu_ms:.2f}", "", "", "", r.load, "", "", r.load_before,
                        json.dumps(r.split) if r.split else "", r.slots])
        for d in drivers:
            w.writerow(["driver", d.farm, d.study_trials, d.new_trials, "", "", "", "",
                        f"{d.per_trial_ms:.2f}", f"{d.per_trial_cpu_ms:.2f}",
                        f"{d.other_cpu_ms:.2f}", f"{d.start_s:.1f}",
                        f"{d.first_sync_s:.1f}", d.load, f"{d.breed_cpu_ms:.2f}",
                        json.dumps(d.parts_ms)])
    lines = [f"# Driver scale{' (quick)' if quick else ''}", "",
             f"DelayedMeasurer, {delay * 1e3:g} ms per measurement, tiny_cnn batch 4, guided "
             "sampler; Ray workers at 0.01 CPU each, "
             + ", ".join(sorted({f"{r.slots} to a process" for r in rows}) or ["-"])
             + " (the measurer's slots_per_process), on a local loopback Ray; "
             f"{os.cpu_count()} cores. Load average (1/5/15 min) measured after each point.", "",
             "Driver ms/trial: the driver loop's wall time not blocked on the pool, per "
             "measurement; CPU: the same in the driver thread's CPU time (without the time it "
             "waited for a core).", "",
             "| workers | measured | seconds | measurements/s | ideal/s | efficiency | "
             "driver ms/trial | driver CPU ms/trial | load avg |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r.workers} | {r.measured} | {r.seconds:.1f} | {r.rate:.1f} | "
                     f"{r.ideal:.0f} | {100 * r.efficiency:.0f} % | {r.driver_ms:.1f} | "
                     f"{r.driver_cpu_ms:.1f} | {r.load} |")
    split = [r for r in rows if r.split]
    if split:
        keys = [k for k in split[0].split if k not in ("measurements", "held %", "rebuilt %")]
        cores = os.cpu_count() or 1
        lines += ["", "CPU ms per measurement by part, from the first batch sent to the pool's "
                  "close (`CpuSplit`: the workers' own accounting, Ray's other processes, "
                  f"this process's threads); `{cores} cores allow`: {cores} x 1000 / total "
                  "measurements/s; `held`: measured as the object the same worker bred:", "",
                  "| workers | load before | " + " | ".join(keys) +
                  f" | {cores} cores allow /s | held |",
                  "|---|---|" + "---|" * len(keys) + "---|---|"]
        for r in split:
            lines.append(f"| {r.workers} | {r.load_before} | " +
                         " | ".join(f"{r.split[k]:.2f}" for k in keys) +
                         f" | {1e3 * cores / r.split['total']:.0f} | {r.split['held %']:.0f} % |")
    if drivers:
        lines += ["", "Driver time per trial of the guided tuner resuming a study of that many "
                  f"trials, in-process but shaped like the driver of {drivers[0].farm} Ray "
                  f"workers ({2 * drivers[0].farm} batches in flight, the cost model retrained "
                  "on a thread), excluding the measurements, the first sync (learning the "
                  "whole study once) and the breeding: an in-process pool breeds when the "
                  "driver submits a breeding request, which with Ray workers is the workers' "
                  "work; it is the breeding column, apart. Background CPU: the retraining "
                  "thread. Components in driver-thread CPU ms/trial (`breed request` is the "
                  "request without the breeding, `sync` runs inside `ask` and the requests):",
                  "",
                  "| study trials | new trials | start s | first sync s | driver ms/trial | "
                  "driver CPU ms/trial | breeding CPU ms/trial (workers' work) | "
                  "background CPU ms/trial | " +
                  " | ".join(k.strip() for k in drivers[0].parts_ms) + " | load avg |",
                  "|---|---|---|---|---|---|---|---|" + "---|" * len(drivers[0].parts_ms) + "---|"]
        for d in drivers:
            lines.append(f"| {d.study_trials} | {d.new_trials} | {d.start_s:.1f} | "
                         f"{d.first_sync_s:.1f} | {d.per_trial_ms:.1f} | "
                         f"{d.per_trial_cpu_ms:.1f} | {d.breed_cpu_ms:.1f} | "
                         f"{d.other_cpu_ms:.1f} | " +
                         " | ".join(f"{v:.2f}" for v in d.parts_ms.values()) + f" | {d.load} |")
    (out / "driver_scale.md").write_text("\n".join(lines) + "\n")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    ws = [r.workers for r in rows]
    a.plot(ws, [r.ideal for r in rows], "k--", label="ideal (workers / delay)")
    a.plot(ws, [r.rate for r in rows], "o-", label="achieved")
    a.set_xscale("log", base=2)
    a.set_yscale("log")
    a.set_xlabel("Ray workers")
    a.set_ylabel("measurements / s")
    a.legend()
    b.plot(ws, [100 * r.efficiency for r in rows], "o-")
    b.axhline(80, color="r", ls=":", label="goal 80 %")
    b.set_xscale("log", base=2)
    b.set_ylim(0, 105)
    b.set_xlabel("Ray workers")
    b.set_ylabel("efficiency %")
    b.legend()
    fig.suptitle(f"graphtune driver scale, {delay * 1e3:g} ms per measurement")
    fig.tight_layout()
    fig.savefig(out / "driver_scale.png", dpi=100)
    plt.close(fig)


def read_driver_rows(path: Path) -> list[DriverRow]:
    """The driver part of an earlier run's CSV."""
    out = []
    for r in csv.DictReader(path.open()):
        if r["part"] == "driver":
            out.append(DriverRow(int(r["study_trials"]), int(r["measured"]), float(r["start_s"]),
                                 float(r["first_sync_s"]), float(r["driver_ms_per_trial"]),
                                 float(r["driver_cpu_ms_per_trial"]),
                                 float(r["background_cpu_ms_per_trial"]),
                                 float(r.get("breeding_cpu_ms_per_trial") or "nan"),
                                 int(r["workers"]) or 64,
                                 json.loads(r.get("parts_cpu_ms_per_trial") or "{}"),
                                 r["load_avg_1_5_15"]))
    return out


def read_worker_rows(path: Path) -> list[ScaleRow]:
    """The workers part of an earlier run's CSV."""
    out = []
    for r in csv.DictReader(path.open()):
        if r["part"] == "workers":
            out.append(ScaleRow(int(r["workers"]), int(r["measured"]), float(r["seconds"]),
                                float(r["measurements_per_s"]), float(r["ideal_per_s"]),
                                float(r["efficiency"]), float(r["driver_ms_per_trial"]),
                                float(r["driver_cpu_ms_per_trial"]), r["load_avg_1_5_15"],
                                r.get("load_before") or "",
                                json.loads(r.get("cpu_split_ms_per_measurement") or "{}"),
                                slots=int(r.get("slots_per_process") or 1)))
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="1, 2, 4 workers, a small study (a smoke run, minutes)")
    ap.add_argument("--workers", default=None, help="comma-separated worker counts")
    ap.add_argument("--delay", type=float, default=0.2, help="seconds per measurement")
    ap.add_argument("--batches-per-worker", type=int, default=None)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--slots", type=int, default=8,
                    help="workers to a Ray actor process (the DelayedMeasurer's "
                         "slots_per_process; 1: a process per worker)")
    ap.add_argument("--study-trials", type=int, default=None)
    ap.add_argument("--guided-trials", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--farm-workers", type=int, default=64,
                    help="the driver-time part keeps 2 batches per such worker in flight")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--study-dir", default=None,
                    help="keep the filled study (log and journal) here and reuse it on the next "
                         "run (the resumed part then runs on a copy)")
    ap.add_argument("--profile", default=None,
                    help="cProfile the resumed guided part into PROFILE.<study trials>")
    ap.add_argument("--keep-workers", action="store_true",
                    help="skip the workers part: keep the worker rows of OUT/driver_scale.csv")
    ap.add_argument("--keep-driver", action="store_true",
                    help="skip the driver part: keep the driver rows of OUT/driver_scale.csv")
    args = ap.parse_args(argv)
    quick = args.quick
    workers = ([int(w) for w in args.workers.split(",")] if args.workers
               else [1, 2, 4] if quick else [1, 2, 4, 8, 16, 32, 64])
    per_worker = args.batches_per_worker or (3 if quick else 6)
    studies = [args.study_trials] if args.study_trials else ([200] if quick else [1000, 10000])
    guided = args.guided_trials or (40 if quick else 300)

    import autotune.running._ray_pool as rp

    rp.START_TIMEOUT_S = 900.0  # 64 actors start slowly on a busy 2-core machine
    graph = tiny_graph()
    print(f"load average at start: {load()}", flush=True)
    rows: list[ScaleRow] = []
    drivers: list[DriverRow] = []
    with tempfile.TemporaryDirectory(prefix="driver_scale") as d:
        study_dir = args.study_dir or d
        os.makedirs(study_dir, exist_ok=True)
        if args.keep_workers:
            rows = read_worker_rows(args.out / "driver_scale.csv")
            workers = []
        if args.keep_driver:
            drivers = read_driver_rows(args.out / "driver_scale.csv")
            studies = []
        stop = rp.start_ray(None, 2) if workers else None
        try:
            for w in workers:
                row = scale_point(graph, w, args.delay, per_worker, args.batch_size, args.seed, d,
                                  args.slots)
                rows.append(row)
                print(f"{w:3d} workers: {row.rate:7.1f} measurements/s of {row.ideal:5.0f} ideal "
                      f"({100 * row.efficiency:3.0f} %), driver {row.driver_ms:5.1f} ms/trial "
                      f"({row.driver_cpu_ms:.1f} CPU), load {row.load_before} before, "
                      f"{row.load} after; best {row.best_us or float('nan'):.2f} us; "
                      f"{row.in_flight} jobs in flight, {row.breeding} of them breeding "
                      "(medians of the middle half)", flush=True)
                if row.split:
                    print("     CPU ms per measurement: " + ", ".join(
                        f"{k} {v:.2f}" for k, v in row.split.items()
                        if k not in ("measurements", "held %", "rebuilt %"))
                        + f"; measured where bred {row.split['held %']:.0f} %, decoded "
                        f"again from its vector {row.split.get('rebuilt %', 0.0):.0f} %"
                        + f" (over {row.split['measurements']:.0f} measurements; "
                        f"{os.cpu_count()} cores allow {os.cpu_count() or 1:d} x 1000 / "
                        f"{row.split['total']:.1f} = "
                        f"{1e3 * (os.cpu_count() or 1) / row.split['total']:.0f}/s)", flush=True)
        finally:
            if stop is not None:
                stop()
        for n in studies:  # one log: each study size tops up the previous one
            dr = driver_point(graph, n, guided, args.seed, study_dir, "study.jsonl",
                              args.farm_workers, args.profile, resume_on_copy=bool(args.study_dir))
            drivers.append(dr)
            print(f"study of {dr.study_trials} trials: guided driver {dr.per_trial_ms:.1f} ms/trial "
                  f"({dr.per_trial_cpu_ms:.1f} CPU; breeding {dr.breed_cpu_ms:.1f} CPU, "
                  f"background {dr.other_cpu_ms:.1f} CPU) over "
                  f"{dr.new_trials} new trials (start {dr.start_s:.1f} s, first sync "
                  f"{dr.first_sync_s:.1f} s), load {dr.load}", flush=True)
            for k, v in dr.parts_ms.items():
                print(f"    {k:34s} {v:7.2f} CPU ms/trial", flush=True)
    write_results(args.out, rows, drivers, args.delay, quick)
    print(f"wrote {args.out / 'driver_scale.md'}, .csv, .png", flush=True)


if __name__ == "__main__":
    main()
