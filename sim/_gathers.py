"""Gathered table rows, priced where the table is (issue 25 item 5).

An embedding lookup (``take``) reads scattered rows of a constant table. Where the
table sits decides what each row costs, and a step places each of its tables where
its rows arrive soonest, among the places that hold it:

* **L1** (the weight buffer): a table of at most half a weight buffer is loaded
  whole through the weight path (DDR once, broadcast by the LLB, a copy into each
  core) and gathered on chip by the move engine at the L1 bandwidth (priced with
  the op's compute, :mod:`sim._model`). The guide's DeepFM keeps its 518 B and
  4 KiB tables there. The weight buffer (0.25 MiB per core, hardware notes: L1 =
  1 MiB data + 0.25 MiB weights; the guide stores constants there, not in the data
  buffer) holds two halves: such tables pass through it **in turn**, one half each,
  as weight tiles do (issue 26): the step's weight path carries its weights and its
  L1 tables, in op order; the first of them loads before compute, the rest stream
  during it (table ``i + 1`` loads while table ``i``'s rows are gathered), so at
  most two items, at most one weight buffer, are resident at any moment. A gather
  cannot read a table before it has arrived, and the path delivers one item at a
  time, so each L1 table's arrival time (``bytes / weight-path rate``) adds to the
  step's per-op weight term as a weighted vector op's weights do
  (:func:`sim._model.group_cost`, ``tables``): the matrix ops' weights queue behind
  the tables on the same path, whatever their order, so the term is a sum.
* **L1 via LLB** (issue 26): an L1 table may instead be copied into the LLB first by
  the cluster's DDR-to-LLB system DMA (hardware notes: sysdma_0 DDR->LLB, two system
  DMAs per cluster; the same copy a table placed in the LLB takes, below) and travel
  from there to the cores' weight buffers (the LLB port broadcasting, each core's port
  at ``dma.core_bytes_per_cycle``) instead of from DDR: the composition of two rules
  that exist. The copy has no producer, so it is ready at cycle 0 and may run during
  earlier steps; it is one reservation (DDR channel and LLB port) taken right after the
  step's staged loads (first come, first served: the ids the step waits for go first).
  Table ``i``'s copy ends at ``copy start + (bytes of tables 0..i) / copy rate +
  latency``; its trip to the cores starts when its copy has ended, not before the
  step's compute (the weight buffer holds two items; the first item of the weight path
  is the one staged), and after the previous table's trip; it takes ``bytes / (LLB to
  L1 rate)`` (``min(port, LLB port)`` with broadcast, ``min(port, LLB port / cores)``
  without). The step's compute waits for the last of them: ``arrival - compute start``
  adds to its per-op weight term (:func:`sim._model.group_cost`, ``tables_wait``), as
  the direct path's ``bytes / weight-path rate`` does. Candidates: the step's L1
  tables other than the one staged before compute, in op order, each that still
  fits the LLB that is free for tables (capacity minus the memory plan's peak, minus
  the step's LLB tables, minus every earlier step's LLB and via-LLB tables: copies
  ready at 0 may all be resident at once). **The choice** (:func:`plan_via_llb`, the
  engine's only call; ``explain`` reads the engine's records): the candidates go via
  the LLB, all of them, iff their arrival after compute start is shorter than
  ``their bytes / weight-path rate`` (what they add on the direct path); ties stay
  direct. A schedule whose LLB is full keeps the direct path.
* **LLB**: a table that fits the LLB no step of the schedule uses (its capacity
  minus the memory plan's peak: conservative, and the same whether the plan came
  from the Python walk or the compiled search core) and no earlier step's tables took
  (their copies are ready at 0, so all of them may be resident at once) is copied once from DDR by the
  cluster's DDR-to-LLB system DMA (one bulk descriptor, DDR and LLB port at their
  bandwidths), then every core fetches its rows from the LLB: each row one
  descriptor on the core's DMA engine (``dma.setup_cycles``) and its bytes on the
  LLB port and the core's port. The rows start when the copy ends.
* **DDR**: every core fetches its rows from DDR, each rounded up to whole DDR
  bursts (``ddr.burst_bytes``) on the channel and the core's port, each its own
  descriptor.

A part of ``k`` cores splits its samples' rows ``k`` ways, so the descriptors of a
step are issued on as many DMA engines (one per core, the hardware notes' "one MTE
queue per NPC") as the step has cores, in parallel. The descriptor time is
occupancy of the core's engine, charged on its port as the bytes it could have
moved meanwhile.

The arrival estimate used to choose (cycles): L1 ``table DDR bytes / DDR rate``;
LLB ``table / DDR rate + max(row bytes / LLB rate, busiest core's rows x (row /
port rate + setup))``; DDR ``max(burst bytes / DDR rate, busiest core's rows x
(burst / port rate + setup))``. The cheapest wins (L1, then LLB, then DDR on ties).
That choice is static (:func:`plan_gathers`); then, once the step's compute start is
known, the engine asks :func:`plan_via_llb` whether its L1 tables come from DDR or via
the LLB (the arrival depends on what the DDR channel carries before: the timeline).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from compiler.opshape import weight_path_bytes_per_cycle

if TYPE_CHECKING:
    from compiler.graph import Graph
    from compiler.target import Target
    from sim._model import GroupWork
    from sim._resources import Chip

__all__ = ["VIA_LLB", "GatherPlan", "GatherRecord", "ViaPlan", "plan_gathers", "plan_via_llb",
           "step_gathers", "via_rate"]

#: The scope of an L1 table that reached the weight buffers from the LLB.
VIA_LLB = "L1 via LLB"


@dataclass(frozen=True)
class GatherRecord:
    """Where one step's gather read its table from, and what it cost there.

    Attributes:
        step: The step (``group_0[1]``).
        op: The gather op's name.
        scope: ``"L1"`` (table loaded whole into the weight buffer from DDR),
            ``"L1 via LLB"`` (the same, copied into the LLB first by the system DMA),
            ``"LLB"`` (table copied into the LLB, rows fetched from there) or ``"DDR"``
            (rows fetched from DDR).
        rows: Rows fetched over all the step's cores (0 for ``L1``: gathered on chip).
        table_bytes: Bytes of the table.
        ddr_bytes: DDR bytes the gather read in the step (the table once, or the rows
            at burst granularity; the table once per core without LLB broadcast).
        arrival_cycles: For ``"L1 via LLB"``: the cycle the step's last table via the LLB
            reached the cores (its compute waits for it); 0 otherwise.
    """

    step: str
    op: str
    scope: str
    rows: int
    table_bytes: float
    ddr_bytes: float
    arrival_cycles: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """Keyed JSON."""
        out: dict[str, Any] = {"step": self.step, "op": self.op, "scope": self.scope,
                               "rows": self.rows, "table_bytes": self.table_bytes,
                               "ddr_bytes": self.ddr_bytes}
        if self.arrival_cycles:
            out["arrival_cycles"] = self.arrival_cycles
        return out


@dataclass
class GatherPlan:
    """The flows of one step's gathers (resource index -> bytes).

    Attributes:
        l1_table_bytes: Tables loaded whole through the weight path (their sum).
        l1_tables: ``(op index, table bytes)`` of those tables, in op order (each at most
            half a weight buffer: they pass through it in turn).
        llb_copy: The DDR-to-LLB copies of the tables placed in the LLB (before the rows).
        llb_copy_ddr: DDR bytes of those copies.
        llb_rows: Rows fetched from the LLB (start when the copies end).
        llb_rows_in: Bytes arriving on each core from the LLB.
        ddr_rows: Rows fetched from DDR.
        ddr_rows_in: Bytes arriving on each core from DDR.
        ddr_rows_ddr: DDR bytes of those rows.
        llb_table_bytes: LLB bytes the tables placed there occupy.
        records: One per gather.
    """

    l1_table_bytes: float = 0.0
    l1_tables: list[tuple[int, float]] = field(default_factory=list)
    llb_copy: dict[int, float] = field(default_factory=dict)
    llb_copy_ddr: float = 0.0
    llb_rows: dict[int, float] = field(default_factory=dict)
    llb_rows_in: dict[int, float] = field(default_factory=dict)
    ddr_rows: dict[int, float] = field(default_factory=dict)
    ddr_rows_in: dict[int, float] = field(default_factory=dict)
    ddr_rows_ddr: float = 0.0
    llb_table_bytes: float = 0.0
    records: list[GatherRecord] = field(default_factory=list)


def _add(d: dict[int, float], k: int, v: float) -> None:
    d[k] = d.get(k, 0.0) + v


def plan_gathers(work: GroupWork, names: tuple[str, ...], step: str, spp: int,
                 parts: tuple[tuple[int, ...], ...], cores: tuple[int, ...], target: Target,
                 chip: Chip, llb_free: float) -> GatherPlan:
    """Place each gather's table of a step and price its rows (see the module doc).

    Args:
        work: The step's group work (its gathers).
        names: The gather ops' names, in ``work.gathers`` order.
        step: The step's label.
        spp: Samples per core part.
        parts: The step's core parts.
        cores: All the step's cores.
        target: The hardware.
        chip: Resource indices.
        llb_free: LLB bytes free for tables (no step of the schedule uses them and no
            earlier step's tables took them).
    """
    burst = max(1, target.ddr.burst_bytes)
    setup = target.dma.setup_cycles
    port_bw = target.dma.core_bytes_per_cycle
    ddr_bw = target.ddr.bytes_per_cycle
    llb_bw = target.llb.bytes_per_cycle
    half_wb = target.l1.weight_bytes / 2
    broadcast = target.llb.broadcast
    plan = GatherPlan()
    for d, name, op in zip(work.gathers, names, work.gather_ops, strict=True):
        row = max(d.row_bytes, 1)
        cost_row = math.ceil(row / burst) * burst
        rows_of: dict[int, int] = {}
        for part in parts:
            n = len(part)
            rows = math.ceil(spp * d.amount / row / n) if d.batched else math.ceil(d.amount / row)
            for c in part:
                rows_of[c] = rows
        total_rows = sum(rows_of.values())
        busiest = max(rows_of.values())
        table = float(d.table_bytes)
        table_ddr = table if broadcast else table * len(cores)
        t_ddr = max(total_rows * cost_row / ddr_bw, busiest * (cost_row / port_bw + setup))
        t_l1 = table_ddr / ddr_bw if table and table <= half_wb else math.inf
        t_llb = math.inf
        if table and target.llb.bytes and table <= llb_free - plan.llb_table_bytes:
            t_llb = table / ddr_bw + max(total_rows * row / llb_bw,
                                         busiest * (row / port_bw + setup))
        best = min(t_l1, t_llb, t_ddr)
        if t_l1 == best and t_l1 < t_ddr:
            plan.l1_table_bytes += table
            plan.l1_tables.append((op, table))
            plan.records.append(GatherRecord(step, name, "L1", 0, table, table_ddr))
        elif t_llb == best and t_llb < t_ddr:
            _add(plan.llb_copy, chip.ddr, table)
            _add(plan.llb_copy, chip.llb, table)
            plan.llb_copy_ddr += table
            plan.llb_table_bytes += table
            for c, r in rows_of.items():
                _add(plan.llb_rows, c, r * row + r * setup * port_bw)
                _add(plan.llb_rows_in, c, r * row)
            _add(plan.llb_rows, chip.llb, total_rows * row)
            plan.records.append(GatherRecord(step, name, "LLB", total_rows, table, table))
        else:
            for c, r in rows_of.items():
                _add(plan.ddr_rows, c, r * cost_row + r * setup * port_bw)
                _add(plan.ddr_rows_in, c, r * cost_row)
            _add(plan.ddr_rows, chip.ddr, total_rows * cost_row)
            plan.ddr_rows_ddr += total_rows * cost_row
            plan.records.append(GatherRecord(step, name, "DDR", total_rows, table,
                                             total_rows * cost_row))
    return plan


def step_gathers(graph: Graph, work: GroupWork, step: str, spp: int,
                 parts: tuple[tuple[int, ...], ...], cores: tuple[int, ...], target: Target,
                 chip: Chip, llb_peak: float) -> GatherPlan:
    """:func:`plan_gathers` for a step when ``llb_peak`` LLB bytes are taken (the memory
    plan's peak and earlier steps' tables); ``explain`` reads the engine's records of it."""
    names = tuple(graph.ops[i].name for i in work.gather_ops)
    return plan_gathers(work, names, step, spp, parts, cores, target, chip,
                        target.llb.bytes - llb_peak)


def via_rate(target: Target, step_cores: int) -> float:
    """Uncontended bandwidth of a table from the LLB into one core's weight buffer."""
    port = target.dma.core_bytes_per_cycle
    if target.llb.broadcast:
        return min(port, target.llb.bytes_per_cycle)
    return min(port, target.llb.bytes_per_cycle / max(step_cores, 1))


@dataclass(frozen=True)
class ViaPlan:
    """L1 tables of one step that go DDR -> LLB -> weight buffers (see the module doc).

    Attributes:
        tables: ``(op index, bytes)`` of the tables, in op order.
        nbytes: Their sum.
        arrival: Cycle the last of them reaches the cores (uncontended).
        trip_ready: When their trip to the cores, as one transfer ending at ``arrival``
            at the LLB-to-L1 rate, may start (never before compute).
    """

    tables: tuple[tuple[int, float], ...]
    nbytes: float
    arrival: float
    trip_ready: float


def plan_via_llb(candidates: list[tuple[int, float]], room: float, copy_start: float,
                 trip_free: float, start: float, target: Target, step_cores: int
                 ) -> ViaPlan | None:
    """Which of a step's L1 tables travel via the LLB, or ``None`` (all direct).

    Args:
        candidates: ``(op index, bytes)`` of the step's L1 tables not staged before
            compute, in op order.
        room: LLB bytes free for them.
        copy_start: When the system DMA's copy starts (ready at cycle 0: when the DDR
            channel and the LLB port are free).
        trip_free: When the step's cores' ports are free (before the copy).
        start: The step's compute start.
        target: The hardware.
        step_cores: The step's cores.

    The arrival is what the engine's two reservations give (first come, first served,
    on the same resources): the copy (DDR channel and LLB port, then setup and DDR
    latency), then the trip as one transfer that ends no sooner than the last table's
    pipelined arrival (table ``i`` leaves the LLB when its copy has ended and the
    previous table has left), starts no sooner than compute, the cores' ports and the
    LLB port are free, and ends with a descriptor's setup.
    """
    if not target.llb.bytes or not candidates:
        return None
    chosen: list[tuple[int, float]] = []
    used = 0.0
    for op, b in candidates:
        if used + b <= room:
            chosen.append((op, b))
            used += b
    if not chosen:
        return None
    setup = target.dma.setup_cycles
    ddr_bw, llb_bw = target.ddr.bytes_per_cycle, target.llb.bytes_per_cycle
    rate = via_rate(target, step_cores)
    copied, piped = copy_start, start
    for _, b in chosen:
        copied += max(b / ddr_bw, b / llb_bw)
        piped = max(piped, copied + setup + target.ddr.latency_cycles) + b / rate
    ready = max(start, piped - used / rate)
    begin = max(ready, trip_free, copy_start + used / llb_bw)
    arrival = begin + used / rate + setup
    if arrival - start >= used / weight_path_bytes_per_cycle(target, step_cores):
        return None
    return ViaPlan(tuple(chosen), used, arrival, ready)
