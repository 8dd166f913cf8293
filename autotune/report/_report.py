"""What ``graphtune report`` shows, as values: tasks read from logs, and what bounds a schedule.

:func:`read_tasks` streams tuning logs once and keeps, per (workload, target), the
measurements in log order (for the tuning curve), the counts by status and by
tuner, the first error of each status, the seed baselines (``prov.tuner`` ``O0``-``O3``
or ``plan:<name>``) and the best record, ranked by :class:`logs.Database` (one
definition of "best", fed in the same pass). :func:`bound_analysis` says what limits a simulated
schedule: the roofline floor's binding term (``compiler/bound.py``), the busy fraction
of each shared resource, and the capacity used. Nothing here draws or formats HTML.

Example:
    >>> tasks, notes = read_tasks(["tune.jsonl"])
    >>> a = bound_analysis(graph, sim_result, target)
    >>> a.verdict
"""

from __future__ import annotations

import os
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import logs

if TYPE_CHECKING:
    from compiler.graph import Graph
    from compiler.target import Target
    from sim import SimResult

__all__ = ["BoundAnalysis", "TaskLog", "bound_analysis", "is_seed_label", "read_tasks"]

# Busy fraction above which a resource counts as the limit, and capacity use above
# which a schedule has no room to grow its chunks or fuse deeper.
BUSY_LIMIT = 0.5
CAPACITY_LIMIT = 0.9
OCCUPIED = "cores occupied by steps (busiest core)"
# DDR traffic above this multiple of the compulsory bytes is worth naming in the verdict.
EXCESS_DDR = 1.2


def is_seed_label(tuner: str) -> bool:
    """Whether ``prov.tuner`` names a seed schedule (``O0``-``O3``, ``plan:<name>``)."""
    return tuner in ("O0", "O1", "O2", "O3") or tuner.startswith("plan:")


@dataclass
class TaskLog:
    """The records of one (workload, target) pair, as the report needs them.

    Attributes:
        workload: The workload (from its first record).
        target: The target.
        latencies: One entry per record in log order: the latency in µs, or None
            for a failed measurement.
        statuses: Records per status value.
        tuners: Records per ``prov.tuner`` ("" for none).
        first_errors: Status value -> the first error message of that status.
        baselines: Seed label -> its best ok latency in µs (None: every record failed).
        best: The best valid record, or None.
        first_time_unix_s: Earliest record time.
        last_time_unix_s: Latest record time.
    """

    workload: logs.WorkloadInfo
    target: logs.TargetKey
    latencies: list[float | None] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)
    tuners: Counter[str] = field(default_factory=Counter)
    first_errors: dict[str, str] = field(default_factory=dict)
    baselines: dict[str, float | None] = field(default_factory=dict)
    best: logs.Record | None = None
    first_time_unix_s: float = float("inf")
    last_time_unix_s: float = 0.0

    @property
    def key(self) -> logs.IndexKey:
        """``(workload key, chip, hash)``."""
        return (self.workload.key, self.target.chip, self.target.hash)

    @property
    def count(self) -> int:
        """Records of the task."""
        return len(self.latencies)

    def best_so_far(self) -> list[float | None]:
        """Lowest ok latency among the first i+1 records, for each i (None before any)."""
        out: list[float | None] = []
        best: float | None = None
        for lat in self.latencies:
            if lat is not None and (best is None or lat < best):
                best = lat
            out.append(best)
        return out

    def best_baseline(self) -> tuple[str, float] | None:
        """The fastest seed that ran: ``(label, latency µs)``."""
        ran = [(lat, label) for label, lat in self.baselines.items() if lat is not None]
        if not ran:
            return None
        lat, label = min(ran)
        return label, lat

    def to_reach(self, fraction: float) -> int | None:
        """Records needed until the best-so-far latency is within ``best / fraction``.

        ``to_reach(0.95)`` is the measurement (1-based) at which the curve first
        comes within 95 % of the final best's speed; None without a valid record.
        """
        if self.best is None or self.best.result.latency_us is None:
            return None
        goal = self.best.result.latency_us / fraction
        for i, lat in enumerate(self.best_so_far(), start=1):
            if lat is not None and lat <= goal:
                return i
        return None


def read_tasks(paths: Sequence[str | os.PathLike[str]]) -> tuple[list[TaskLog], list[str]]:
    """Read tuning logs into one :class:`TaskLog` per (workload, target), in order of first record.

    Args:
        paths: Log files, read in the order given (that order is the curves' order).

    Returns:
        The tasks and the readers' warnings (skipped lines), one line each.

    Raises:
        LogError: A file cannot be read, is not a log, has a newer major version,
            or no file holds any record.
    """
    tasks: dict[logs.IndexKey, TaskLog] = {}
    db = logs.Database(top_k=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", logs.LogWarning)
        for path in paths:
            for record in logs.read_records(path):
                _add(tasks, record)
                db.add(record)
    notes = [str(w.message) for w in caught if issubclass(w.category, logs.LogWarning)]
    if not tasks:
        names = ", ".join(os.fspath(p) for p in paths)
        skipped = f"; {notes[0]}" if notes else ""
        raise logs.LogError(f"{names}: no tuning record to report{skipped}")
    for task in tasks.values():
        found = db.best(task.workload.key, task.target, 1)
        task.best = found[0] if found else None
    return list(tasks.values()), notes


def _add(tasks: dict[logs.IndexKey, TaskLog], record: logs.Record) -> None:
    task = tasks.get(record.index_key)
    if task is None:
        task = tasks[record.index_key] = TaskLog(record.workload, record.target)
    result = record.result
    ok = result.is_valid and result.latency_us is not None
    task.latencies.append(result.latency_us if ok else None)
    task.statuses[result.status.value] += 1
    tuner = record.prov.tuner
    task.tuners[tuner] += 1
    if not ok:
        task.first_errors.setdefault(result.status.value, result.error)
    if is_seed_label(tuner):
        old = task.baselines.get(tuner)
        lat = result.latency_us if ok else None
        task.baselines[tuner] = lat if old is None else (old if lat is None else min(old, lat))
    task.first_time_unix_s = min(task.first_time_unix_s, record.prov.time_unix_s)
    task.last_time_unix_s = max(task.last_time_unix_s, record.prov.time_unix_s)


# ---- what bounds a schedule --------------------------------------------------------------
@dataclass(frozen=True)
class BoundAnalysis:
    """What limits one simulated schedule.

    Attributes:
        floor: The roofline floor's binding term: ``"compute"`` or ``"DDR"``.
        floor_us: The floor (``SimResult.lower_bound_us``, host launch included).
        launch_us: The host launch part of it.
        ddr_floor_us: Compulsory DDR bytes at the DDR bandwidth.
        compute_floor_us: The compute term when it binds; None when DDR binds (the
            compute term is then at most ``ddr_floor_us``).
        compulsory_ddr_bytes: Bytes every schedule moves through DDR.
        resources: ``(name, busy / latency)``, busiest first: the cores' occupancy
            by steps (from the timeline; it includes waiting for streamed weights),
            their matrix and vector engines, their DMA ports, the DDR channel, the
            LLB port, the busiest NoC link, and the host launch's share.
        limit: The busiest resource's name (occupancy aside), or ``"dependencies"``
            when none is busy more than :data:`BUSY_LIMIT` of the time.
        l1_fraction: Peak L1 use of the fullest core over its data capacity.
        llb_fraction: Peak LLB use over its capacity.
        capacity_bound: L1 or LLB above :data:`CAPACITY_LIMIT`.
        verdict: One sentence for people.
    """

    floor: str
    floor_us: float
    launch_us: float
    ddr_floor_us: float
    compute_floor_us: float | None
    compulsory_ddr_bytes: float
    resources: tuple[tuple[str, float], ...]
    limit: str
    l1_fraction: float
    llb_fraction: float
    capacity_bound: bool
    verdict: str


def bound_analysis(graph: Graph, result: SimResult, target: Target) -> BoundAnalysis:
    """Compare a result's busy fractions with the floor's terms and the capacities.

    Args:
        graph: The graph that was simulated.
        result: Its simulation (any ``timeline`` setting: the steps are always kept).
        target: The chip it was simulated on.
    """
    from compiler.bound import compulsory_ddr_bytes

    ddr_bytes = compulsory_ddr_bytes(graph, result.batch, target)
    ddr_floor = target.cycles_to_us(ddr_bytes / target.ddr.bytes_per_cycle)
    launch = target.host.launch_overhead_us
    # lower_bound = max(compute, ddr) + launch: whichever term is larger binds.
    above_ddr = result.lower_bound_us - launch - ddr_floor
    compute_binds = above_ddr > 1e-9 * max(result.lower_bound_us, 1.0)
    floor = "compute" if compute_binds else "DDR"
    compute_floor = result.lower_bound_us - launch if compute_binds else None

    resources = _resources(result)
    if result.latency_us > 0:
        resources.append(("host launch", launch / result.latency_us))
    resources.sort(key=lambda r: -r[1])
    # A step occupies its cores while it waits for streamed weights too, so occupancy
    # is shown but never named the limit: the engines and the channels are.
    limits = [r for r in resources if r[0] != OCCUPIED]
    top_name, top_busy = limits[0] if limits else ("", 0.0)
    limit = top_name if top_busy > BUSY_LIMIT else "dependencies"
    l1 = result.peak_l1_bytes / target.l1.data_bytes
    llb = result.peak_llb_bytes / target.llb.bytes if target.llb.bytes else 0.0
    capacity = max(l1, llb) > CAPACITY_LIMIT
    return BoundAnalysis(
        floor=floor, floor_us=result.lower_bound_us, launch_us=launch, ddr_floor_us=ddr_floor,
        compute_floor_us=compute_floor, compulsory_ddr_bytes=ddr_bytes,
        resources=tuple(resources), limit=limit, l1_fraction=l1, llb_fraction=llb,
        capacity_bound=capacity,
        verdict=_verdict(result, floor, launch, ddr_floor, compute_floor, ddr_bytes, limit,
                         top_busy, l1, llb, capacity),
    )


def _resources(result: SimResult) -> list[tuple[str, float]]:
    busy = result.busy_fraction()
    rows: list[tuple[str, float]] = []
    computing = _core_compute_fraction(result)
    if computing:
        rows.append((OCCUPIED, max(computing.values())))
    for engine, label in (("mme", "matrix engine"), ("vme", "vector engine"), ("dma", "core DMA")):
        vals = [v for k, v in busy.items() if k.startswith("core") and k.endswith("." + engine)]
        if vals:
            rows.append((f"{label} (busiest core)", max(vals)))
    for name, label in (("ddr", "DDR channel"), ("llb", "LLB port")):
        if name in busy:
            rows.append((label, busy[name]))
    links = {k: v for k, v in busy.items() if k.startswith("noc")}
    if links:
        top = max(sorted(links), key=links.__getitem__)
        rows.append((f"NoC link {top[4:]} (busiest)", links[top]))
    return rows


def _core_compute_fraction(result: SimResult) -> dict[int, float]:
    """Core -> time spent computing group steps (union of intervals) / latency."""
    spans: dict[int, list[tuple[float, float]]] = {}
    for step in result.steps:
        if step.kind != "group":
            continue
        for core in step.cores:
            spans.setdefault(core, []).append((step.start_cycles, step.end_cycles))
    lat = result.latency_cycles or 1.0
    out: dict[int, float] = {}
    for core, intervals in spans.items():
        total, end = 0.0, float("-inf")
        for a, b in sorted(intervals):
            if b <= end:
                continue
            total += b - max(a, end)
            end = b
        out[core] = total / lat
    return out


def _verdict(result: SimResult, floor: str, launch: float, ddr_floor: float,
             compute_floor: float | None, compulsory: float, limit: str, busy: float, l1: float,
             llb: float, capacity: bool) -> str:
    ratio = result.latency_over_bound
    if limit == "dependencies":
        head = (f"No resource is busy more than {BUSY_LIMIT:.0%} of the time: the latency "
                "is set by dependencies and fill/drain, not by a bandwidth")
    elif limit == "host launch":
        head = (f"Launch-bound: the host launch ({launch:,.1f} µs) is {busy:.0%} of the latency")
    elif limit.startswith(("matrix", "vector")):
        head = f"Compute-bound: the {limit} is busy {busy:.0%} of the latency"
    elif limit.startswith("DDR"):
        head = f"DDR-bound: the DDR channel is busy {busy:.0%} of the latency"
        if result.ddr_bytes > EXCESS_DDR * compulsory:
            head += (f" and moves {result.ddr_bytes / compulsory:.1f}x the compulsory bytes "
                     f"({result.weight_bytes_loaded / 1e6:,.1f} MB of it weights and gathers "
                     "loaded, the rest activations)")
    elif limit.startswith("NoC"):
        head = f"NoC-bound: {limit} is busy {busy:.0%} of the latency"
    else:
        head = f"Bound by the {limit}: busy {busy:.0%} of the latency"
    term = compute_floor if compute_floor is not None else ddr_floor
    floor_text = (f"latency / floor = {ratio:.2f}"
                  + (" (within 10 % of it)" if ratio <= 1.1 else "")
                  + f", the floor being the host launch {launch:,.1f} µs + the {floor} term "
                  f"{term:,.1f} µs")
    cap = ""
    if capacity:
        which = "L1" if l1 >= llb else "LLB"
        cap = (f"; capacity-bound too: peak {which} at {max(l1, llb):.0%} of its size, so "
               "larger chunks or deeper fusion would not fit")
    return f"{head}; {floor_text}{cap}."
