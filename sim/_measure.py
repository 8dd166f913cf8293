"""``measure``: the batch boundary the tuner's workers call.

A batch of schedules of one graph goes in; one :class:`Measurement` per schedule
comes out, in order. Nothing raises for a bad candidate: a structural problem,
an overflow, an invariant violation, an internal exception or a timeout is a
measurement with a status from the log's vocabulary (:class:`logs.Status`), so
it can be written as a record and the job goes on (TVM MetaSchedule's
``run(list[Input]) -> list[Result]`` shape).

Example:
    >>> ms = measure(graph, [s1, s2], Target.default(), timeout_s=5)
    >>> [m.status for m in ms], ms[0].to_log_result()
"""

from __future__ import annotations

import ctypes
import signal
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sim._engine import run
from sim._result import SimError, SimResult

if TYPE_CHECKING:
    from compiler.graph import Graph
    from compiler.schedule import GraphSchedule
    from compiler.target import Target
    from logs import Record, Result

__all__ = ["MEASURER", "MEASURER_VERSION", "Measurement", "measure"]

MEASURER = "sim"
MEASURER_VERSION = "5"  # bump when a cost term changes: results of different versions differ
# 3 (issue 26): embedding tables gathered in L1 pass through the weight buffer in turn

# SimError.status -> logs.Status value. An invariant violation is a simulator bug, so it is
# logged as "sim_error" (the log format adds no status codes within a major version) with
# the invariant named in the error text.
_STATUS = {"invalid": "invalid_schedule", "capacity": "capacity", "invariant": "sim_error"}


@dataclass(frozen=True)
class Measurement:
    """One schedule's outcome, small enough to ship back from a worker.

    Attributes:
        status: A :class:`logs.Status` value (``"ok"``, ``"invalid_schedule"``,
            ``"capacity"``, ``"sim_error"`` — an internal error or a violated
            invariant, named in ``error`` — or ``"timeout"``).
        latency_us: Latency of one batch on one cluster (None unless ok).
        throughput_per_s: Samples per second of the whole chip, one stream per
            cluster (None unless ok).
        lower_bound_us: The roofline bound of the batch (0 when unknown).
        error: One line saying what went wrong ("" when ok).
        seconds: Wall time the measurement took.
        result: The full :class:`SimResult` (timeline off unless asked) or None.
    """

    status: str
    latency_us: float | None
    throughput_per_s: float | None
    lower_bound_us: float
    error: str
    seconds: float
    result: SimResult | None = None

    @property
    def ok(self) -> bool:
        """Whether the schedule ran."""
        return self.status == "ok"

    @property
    def latency_over_bound(self) -> float | None:
        """Latency divided by the lower bound (None unless ok)."""
        if self.latency_us is None or not self.lower_bound_us:
            return None
        return self.latency_us / self.lower_bound_us

    def to_log_result(self) -> Result:
        """The :class:`logs.Result` of a record (with the bound when it is known)."""
        from logs import Result, Status

        return Result(Status(self.status), self.latency_us, self.throughput_per_s, self.error,
                      lower_bound_us=self.lower_bound_us or None)

    def to_record(self, graph: Graph, schedule: GraphSchedule | dict[str, Any], target: Target,
                  **prov: Any) -> Record:
        """A log record of this measurement (``prov``: Provenance fields, e.g. tuner="manual");
        ``schedule`` may be given as its JSON already written."""
        from logs import Provenance, Record, TargetKey, WorkloadInfo

        prov.setdefault("measurer", MEASURER)
        prov.setdefault("measurer_version", MEASURER_VERSION)
        return Record(
            WorkloadInfo(graph.workload_key, graph.name,
                         {n: tuple(s) for n, s in graph.input_shapes().items()}, graph.batch),
            TargetKey(target.name, target.hash),
            schedule if isinstance(schedule, dict) else schedule.to_json(),
            self.to_log_result(),
            Provenance.now(**prov),
        )

    def to_json(self) -> dict[str, Any]:
        """Keyed JSON (without the full result)."""
        return {
            "status": self.status, "latency_us": self.latency_us,
            "throughput_per_s": self.throughput_per_s, "lower_bound_us": self.lower_bound_us,
            "error": self.error, "seconds": self.seconds,
        }


class _Timeout(Exception):
    pass


@contextmanager
def _deadline(seconds: float | None) -> Iterator[None]:
    """Raise :class:`_Timeout` after ``seconds``: by SIGALRM in the main thread, by an
    asynchronous exception from a timer thread elsewhere (a threaded Ray actor's slots,
    :attr:`autotune.Measurer.slots_per_process`: review), so a slow simulation gives the
    same ``timeout`` record whichever thread runs it."""
    if not seconds:
        yield
        return
    if threading.current_thread() is not threading.main_thread():
        with _thread_deadline(seconds):
            yield
        return

    def alarm(signum: int, frame: object) -> None:
        raise _Timeout

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@contextmanager
def _thread_deadline(seconds: float) -> Iterator[None]:
    """:func:`_deadline` off the main thread: a timer sets :class:`_Timeout` as this
    thread's pending exception (``PyThreadState_SetAsyncExc``: raised at its next bytecode)
    while the block runs; one fired as the block ends is withdrawn before it can be raised
    outside it."""
    tid = threading.get_ident()
    guard = threading.Lock()
    state = {"inside": True, "fired": False}

    def fire() -> None:
        with guard:
            if state["inside"]:
                state["fired"] = True
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(tid),
                                                           ctypes.py_object(_Timeout))

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        with guard:
            state["inside"] = False
            if state["fired"]:  # not raised yet (or already raised: then a no-op)
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(tid), None)


def measure_one(graph: Graph, schedule: GraphSchedule, target: Target, *,
                timeout_s: float | None = None, timeline: bool = False) -> Measurement:
    """Measure one schedule (see :func:`measure`)."""
    t0 = time.perf_counter()
    try:
        with _deadline(timeout_s):
            r = run(graph, schedule, target, record=timeline)
    except _Timeout:
        return Measurement("timeout", None, None, 0.0,
                           f"simulation took longer than {timeout_s:g} s",
                           time.perf_counter() - t0)
    except Exception as exc:  # an internal error is data, never the end of a batch
        return Measurement("sim_error", None, None, 0.0,
                           f"internal simulator error: {type(exc).__name__}: {exc}"[:500],
                           time.perf_counter() - t0)
    dt = time.perf_counter() - t0
    if isinstance(r, SimError):
        return Measurement(_STATUS.get(r.status, "sim_error"), None, None, r.lower_bound_us,
                           r.message, dt)
    return Measurement("ok", r.latency_us, r.chip_throughput_per_s, r.lower_bound_us, "", dt,
                       r)


def measure(graph: Graph, schedules: Iterable[GraphSchedule], target: Target, *,
            timeout_s: float | None = None, timeline: bool = False) -> list[Measurement]:
    """Simulate a batch of schedules of one graph; one measurement per schedule, in order.

    Args:
        graph: The model (or one NPU sub-function) at the schedules' batch.
        schedules: Candidates; any may be invalid or not fit.
        target: The chip.
        timeout_s: Per-schedule wall-time limit (enforced in the main thread).
        timeline: Keep per-resource DMA events (off for tuning: smaller results).

    Returns:
        One :class:`Measurement` per schedule. Never raises for a bad candidate.
    """
    return [measure_one(graph, s, target, timeout_s=timeout_s, timeline=timeline)
            for s in schedules]
