"""``DelayedMeasurer``: the simulator behind a board's pace and failures (a test double).

A board runner compiles and runs each candidate: about 0.2 s a measurement,
and now and then one fails. :class:`DelayedMeasurer` behaves like that on any
machine: every measurement takes at least ``delay_s`` of wall time (a batch
is simulated first, then one sleep takes the rest of the batch's time), and a seeded share ``fail_rate`` of
candidates come back as failed records. Whether a candidate fails depends
only on ``seed`` and the schedule, so a run is reproducible and a resumed job
sees the same failures. Name it on the command line::

    graphtune tune m.onnx --measurer delayed --measurer-arg delay_s=0.2 \\
        --measurer-arg fail_rate=0.05 --trials 500 --log t.jsonl
    # or: --measurer autotune:DelayedMeasurer

Its sleep is a wait, not work: with ``slots_per_process=N`` a Ray pool runs N workers'
measurements as threads of one process (:mod:`autotune.measure._slots`; the sleep is
inside :func:`autotune.measure.waiting`), as a board runner waiting on its boards could.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from autotune.measure._measurer import SimMeasurer
from autotune.measure._slots import waiting
from compiler.errors import GraphtuneError

if TYPE_CHECKING:
    from compiler.graph import Graph
    from compiler.schedule import GraphSchedule
    from compiler.target import Target
    from sim import Measurement

__all__ = ["DelayedMeasurer"]

_FAIL_STATUSES = ("sim_error", "timeout", "capacity")


class DelayedMeasurer(SimMeasurer):
    """The simulator, at least ``delay_s`` per measurement, failing a seeded share.

    Args:
        delay_s: Minimum wall time of one measurement (measurements of a batch run
            one after another, as on one board).
        fail_rate: Share of candidates that fail (0 to 1), chosen by a hash of the
            seed and the schedule: the same candidate always gets the same answer.
        fail_status: Status of a failed measurement: ``sim_error`` (default),
            ``timeout`` or ``capacity``.
        seed: Which candidates fail.
        num_cpus: CPUs each Ray worker reserves (default 1; a measurer that mostly
            sleeps needs little: 0.01 packs 64 workers on a 2-core host).
        resources: Custom Ray resources each worker needs (e.g. ``{"stcp920": 1}``).
        slots_per_process: Workers' measurements one Ray actor process may run at once,
            as threads (default 1; see :attr:`autotune.Measurer.slots_per_process`):
            the sleeps overlap, the simulations take turns.

    Raises:
        GraphtuneError: an option out of range.
    """

    def __init__(self, delay_s: float = 0.2, fail_rate: float = 0.0,
                 fail_status: str = "sim_error", seed: int = 0, num_cpus: float = 1.0,
                 resources: Mapping[str, float] | None = None,
                 slots_per_process: int = 1) -> None:
        super().__init__()
        if not _finite(delay_s) or delay_s < 0:
            raise GraphtuneError(f"delay_s must be a finite number >= 0, got {delay_s!r}")
        if not _finite(fail_rate) or not 0.0 <= fail_rate <= 1.0:
            raise GraphtuneError(f"fail_rate must be between 0 and 1, got {fail_rate!r}")
        if fail_status not in _FAIL_STATUSES:
            raise GraphtuneError(f"fail_status must be one of {', '.join(_FAIL_STATUSES)}, "
                                 f"got {fail_status!r}")
        if not isinstance(seed, int):
            raise GraphtuneError(f"seed must be an integer, got {seed!r}")
        if not _finite(num_cpus) or num_cpus < 0:
            raise GraphtuneError(f"num_cpus must be a finite number >= 0, got {num_cpus!r}")
        self.delay_s = float(delay_s)
        self.fail_rate = float(fail_rate)
        self.fail_status = fail_status
        self.seed = seed
        if (not isinstance(slots_per_process, int) or isinstance(slots_per_process, bool)
                or slots_per_process < 1):
            raise GraphtuneError("slots_per_process must be an integer >= 1, got "
                                 f"{slots_per_process!r}")
        self.num_cpus = float(num_cpus)
        self.slots_per_process = slots_per_process
        self.resources = dict(resources or {})
        self.name = "sim-delayed"
        # The delay changes no result; the failures do: records of another failure set
        # are not reused on resume.
        self.version = f"{self.version}+fail{self.fail_rate:g}:{fail_status}:{seed}"

    def fails(self, schedule: GraphSchedule) -> bool:
        """Whether this candidate is one of the injected failures."""
        if self.fail_rate <= 0.0:
            return False
        # What the schedule does, not where it came from (its ``source`` label).
        text = repr(schedule.structural_key())
        digest = hashlib.blake2b(f"{self.seed}\0{text}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big") / 2.0**64 < self.fail_rate

    def measure(self, graph: Graph, schedules: Sequence[GraphSchedule], target: Target,
                timeout_s: float | None) -> list[Measurement]:
        """The batch's simulations first, back to back, then one wait for the rest of its
        time: measurement ``k`` takes ``max(delay_s, its simulation)`` of the batch's wall
        time, as on a board that runs the batch one after another once it is compiled.

        Simulating right after each 200 ms sleep cost twice the CPU of simulating back to
        back (tiny_cnn b4, one process: 1.47 against 0.71 ms a measurement; the caches are
        cold after a sleep, issue 20), and one wait a batch hands a multi-slot process's
        CPU lock over once rather than once a measurement.
        """
        from sim import Measurement, measure

        if timeout_s is not None and self.delay_s > timeout_s:
            out: list[Measurement] = []
            for _ in schedules:
                with waiting():
                    time.sleep(timeout_s)
                out.append(Measurement("timeout", None, None, 0.0,
                                       f"the measurement takes {self.delay_s:g} s, over the "
                                       f"{timeout_s:g} s limit", timeout_s))
            return out
        t0 = time.perf_counter()
        failed = [self.fails(s) for s in schedules]
        todo = [s for s, f in zip(schedules, failed) if not f]
        simulated = iter(measure(graph, todo, target, timeout_s=timeout_s) if todo else ())
        out = []
        for f in failed:
            m = (Measurement(self.fail_status, None, None, 0.0,
                             f"injected failure (DelayedMeasurer fail_rate={self.fail_rate:g}, "
                             f"seed={self.seed})", 0.0) if f else next(simulated))
            out.append(_with_seconds(m, max(self.delay_s, m.seconds)))
        rest = sum(m.seconds for m in out) - (time.perf_counter() - t0)
        if rest > 0:
            with waiting():  # another slot of this process may work meanwhile
                time.sleep(rest)
        return out


def _with_seconds(m: Measurement, seconds: float) -> Measurement:
    from dataclasses import replace

    return replace(m, seconds=seconds)


def _finite(x: object) -> bool:
    """A real number (not a bool), neither NaN nor infinite (JSON reads ``1e999`` as inf)."""
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
