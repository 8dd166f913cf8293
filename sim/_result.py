"""What a simulation returns: :class:`SimResult` for a valid schedule, :class:`SimError` otherwise."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from sim._gathers import GatherRecord
from sim._host import HostSegment

__all__ = ["DmaEvent", "SimError", "SimResult", "StepRecord"]

RESULT_VERSION = 1


@dataclass(frozen=True)
class StepRecord:
    """One step of the timeline (cycles from the start of the inference).

    Attributes:
        name: ``group_0[3]`` or ``concat_1``.
        kind: ``"group"`` or ``"transfer"``.
        cores: Cores the step runs on (group) or writes to (transfer).
        load_start_cycles: When its input and first-weight loads started.
        load_end_cycles: When they finished.
        start_cycles: Compute start (transfers: equal to the load start).
        end_cycles: Compute end (transfers: the data is in place).
        store_end_cycles: When its output reached its memory scope.
        mme_cycles: Matrix engine busy time per core.
        vme_cycles: Vector engine busy time per core.
        l1_bytes: Largest L1 use on one of its cores while it ran.
        mem_scope: Where its output lives.
    """

    name: str
    kind: str
    cores: tuple[int, ...]
    load_start_cycles: float
    load_end_cycles: float
    start_cycles: float
    end_cycles: float
    store_end_cycles: float
    mme_cycles: float
    vme_cycles: float
    l1_bytes: int
    mem_scope: str

    def to_json(self) -> dict[str, Any]:
        """Keyed JSON."""
        return {
            "name": self.name,
            "kind": self.kind,
            "cores": list(self.cores),
            "load_start_cycles": self.load_start_cycles,
            "load_end_cycles": self.load_end_cycles,
            "start_cycles": self.start_cycles,
            "end_cycles": self.end_cycles,
            "store_end_cycles": self.store_end_cycles,
            "mme_cycles": self.mme_cycles,
            "vme_cycles": self.vme_cycles,
            "l1_bytes": self.l1_bytes,
            "mem_scope": self.mem_scope,
        }


_STEP_FIELDS = tuple(f.name for f in fields(StepRecord))


def step_record(values: list[Any]) -> StepRecord:
    """``StepRecord(*values)`` made without the frozen dataclass's ``__init__`` (one
    ``object.__setattr__`` per field: a measurement makes one per step); the same value."""
    rec = object.__new__(StepRecord)
    rec.__dict__.update(zip(_STEP_FIELDS, values, strict=True))
    return rec


@dataclass(frozen=True)
class DmaEvent:
    """One reservation of a transfer on one resource (for the trace).

    Attributes:
        label: What moved (``group_1[0] load``, ``concat_2``).
        resource: Resource name (``core3.dma``, ``ddr``, ``noc (0,0)->(0,1)``).
        start_cycles: Start.
        duration_cycles: Time the resource was busy with it.
        nbytes: Bytes it moved over that resource (duration x the resource's bytes per
            cycle).
    """

    label: str
    resource: str
    start_cycles: float
    duration_cycles: float
    nbytes: float = 0.0


@dataclass(frozen=True)
class SimResult:
    """Simulated performance of a valid schedule on one cluster (frozen).

    Attributes:
        status: Always ``"ok"``.
        batch: Samples per inference.
        latency_cycles: One inference, host launch included.
        latency_us: The same in microseconds.
        throughput_per_s: Samples per second of one cluster (one stream).
        chip_throughput_per_s: Samples per second of the chip, every cluster running
            its own stream (DDR, LLB and NoC are per cluster, so streams do not share).
        lower_bound_us: Roofline bound of the same batch (see ``sim.lower_bound``).
        busy_cycles: Resource name -> busy cycles (``core0.mme``, ``core0.vme``,
            ``core0.dma``, ``llb``, ``ddr``, NoC links).
        peak_l1_bytes: Largest L1 data use of any core.
        peak_l1_bytes_per_core: The same for each core.
        peak_llb_bytes: Largest LLB use of the cluster.
        ddr_bytes: Bytes through the DDR channel (weights, inputs, spills, outputs).
        noc_bytes: Bytes moved between cores over the NoC.
        llb_bytes: Bytes through the LLB port.
        weight_bytes_loaded: Weight and gathered-table bytes read from DDR.
        clock_hz: Clock of the target (cycles -> seconds).
        steps: The timeline.
        dma_events: Resource reservations, for the trace.
        host_segments: Ops that ran on the host CPU, per step, with their time
            (:mod:`sim._host`); their total is ``busy_cycles["host"]``.
        gathers: Per step and gather op, where its table was read from (``L1``,
            ``L1 via LLB``, ``LLB``, ``DDR``), the rows fetched and the DDR bytes
            (:mod:`sim._gathers`).
    """

    status: str
    batch: int
    clock_hz: float
    latency_cycles: float
    latency_us: float
    throughput_per_s: float
    chip_throughput_per_s: float
    lower_bound_us: float
    busy_cycles: Mapping[str, float]
    peak_l1_bytes: int
    peak_l1_bytes_per_core: tuple[int, ...]
    peak_llb_bytes: int
    ddr_bytes: float
    noc_bytes: float
    llb_bytes: float
    weight_bytes_loaded: float
    steps: tuple[StepRecord, ...] = field(repr=False)
    dma_events: tuple[DmaEvent, ...] = field(repr=False, default=())
    host_segments: tuple[HostSegment, ...] = ()
    gathers: tuple[GatherRecord, ...] = ()

    @property
    def ok(self) -> bool:
        """True: the schedule is valid."""
        return True

    @property
    def latency_over_bound(self) -> float:
        """``latency / lower bound`` (>= 1; 1 would be perfect)."""
        return self.latency_us / self.lower_bound_us if self.lower_bound_us > 0 else float("inf")

    def busy_fraction(self) -> dict[str, float]:
        """Resource name -> busy time / latency."""
        lat = self.latency_cycles or 1.0
        return {k: v / lat for k, v in self.busy_cycles.items()}

    def to_json(self, timeline: bool = False) -> dict[str, Any]:
        """Keyed JSON (the CLI's ``--json`` fields and more)."""
        out: dict[str, Any] = {
            "v": RESULT_VERSION,
            "status": self.status,
            "batch": self.batch,
            "latency_cycles": self.latency_cycles,
            "latency_us": self.latency_us,
            "throughput_per_s": self.throughput_per_s,
            "chip_throughput_per_s": self.chip_throughput_per_s,
            "lower_bound_us": self.lower_bound_us,
            "latency_over_bound": self.latency_over_bound,
            "peak_l1_bytes": self.peak_l1_bytes,
            "peak_l1_bytes_per_core": list(self.peak_l1_bytes_per_core),
            "peak_llb_bytes": self.peak_llb_bytes,
            "ddr_bytes": self.ddr_bytes,
            "noc_bytes": self.noc_bytes,
            "llb_bytes": self.llb_bytes,
            "weight_bytes_loaded": self.weight_bytes_loaded,
            "busy_cycles": dict(self.busy_cycles),
            "host_segments": [h.to_json() for h in self.host_segments],
            "gathers": [r.to_json() for r in self.gathers],
            "error": None,
        }
        if timeline:
            out["steps"] = [s.to_json() for s in self.steps]
        return out


@dataclass(frozen=True)
class SimError:
    """Why a schedule cannot run (frozen; a value, never raised).

    Attributes:
        status: ``"invalid"`` (structure: the ScheduleError message), ``"capacity"``
            or ``"invariant"`` (the simulator produced a physically impossible
            result: a simulator bug, see ``sim._invariants``).
        message: One line naming the problem.
        resource: ``"L1 of core 5"``, ``"LLB of cluster 0"`` ("" for structural errors).
        step: The step that overflowed ("" for structural errors).
        needed_bytes: Bytes the step needed on that resource.
        available_bytes: Its capacity.
        live_tensors: ``(name, bytes)`` of what occupied it, largest first.
        lower_bound_us: Roofline bound of the batch (0 when unknown).
        invariant: For status ``"invariant"``: which one (``"latency>=bound"``,
            ``"flops<=peak"``, ``"ddr>=compulsory"``, ``"busy<=100%"``).
    """

    status: str
    message: str
    resource: str = ""
    step: str = ""
    needed_bytes: int = 0
    available_bytes: int = 0
    live_tensors: tuple[tuple[str, int], ...] = ()
    lower_bound_us: float = 0.0
    invariant: str = ""

    @property
    def ok(self) -> bool:
        """False: the schedule cannot run."""
        return False

    def to_json(self) -> dict[str, Any]:
        """Keyed JSON with the CLI's fields (performance fields null)."""
        return {
            "v": RESULT_VERSION,
            "status": self.status,
            "latency_us": None,
            "throughput_per_s": None,
            "chip_throughput_per_s": None,
            "peak_l1_bytes": None,
            "peak_llb_bytes": None,
            "ddr_bytes": None,
            "noc_bytes": None,
            "lower_bound_us": self.lower_bound_us or None,
            "error": self.message,
            "resource": self.resource or None,
            "step": self.step or None,
            "needed_bytes": self.needed_bytes or None,
            "available_bytes": self.available_bytes or None,
            "live_tensors": [{"name": n, "bytes": b} for n, b in self.live_tensors],
            "invariant": self.invariant or None,
        }
