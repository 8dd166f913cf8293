"""The simulation loop: steps in schedule order on shared resources.

Capacity is decided first, without timing, by the one capacity model
(:func:`compiler.capacity.plan_memory`: lifetimes over the order, per-core L1,
the cluster's LLB, working sets per core part); an overflow ends the
simulation with a :class:`~sim._result.SimError` before any timing. Its
per-step facts (which inputs stream from LLB/DDR, L1 in use on each core) feed
the timing walk. For each step of ``schedule.order`` (one cluster; core ids
within it):

1. **Loads** (staged inputs not already on the step's cores: another core's L1
   over the NoC, the LLB, DDR; gathered table rows; the first item of the weight
   path: a weight tile or an embedding table gathered in L1, whichever comes
   first in op order), one
   reservation per source, each once its data is ready. They may start while
   the previous step on those cores still computes (prefetch, double buffering)
   when that step's L1 use plus the incoming bytes fit in L1; otherwise they
   wait for it to end.
2. **Compute** on the step's cores (synchronised) once loads are done, the data
   is ready and the cores are free, priced part by part (a part of ``k`` cores
   splits its samples' rows ``k`` ways; the slowest part sets the step's time).
   During it stream the remaining weights and L1 tables (DDR through the LLB,
   broadcast; they pass through the weight buffer in turn, :mod:`sim._gathers`; L1
   tables may instead come from the LLB after a system-DMA copy ready at cycle 0,
   reserved after the step's staged loads, when they arrive sooner so), the
   inputs read tile by tile from LLB/DDR (once more per extra weight tile of an op
   re-reading them), the output placed in LLB/DDR and the exchange between the
   cores of a part that cut a sample (halos, batched-matmul operands, on the NoC);
   the step ends when compute and those streams are done.

Transfers (split/concat) are loads and nothing else. Reservations are first come,
first served (:class:`~sim._resources.Reservations`). Every result is checked
against the invariants of :mod:`sim._invariants` before it is returned.
"""

from __future__ import annotations

from array import array
from collections.abc import MutableSequence
from dataclasses import replace
from typing import TYPE_CHECKING

from compiler._validate import known_valid, mark_valid
from compiler.bound import lower_bound_cycles
from compiler.capacity import MemoryPlan, in_compute_dtype, order_nodes, plan_memory
from compiler.derive import chunk_dag
from compiler.errors import ScheduleError
from compiler.footprint import sample_bytes
from compiler.layout import group_layout, transfer_layout
from sim._ctime import MAX_CORES, built, load_pack, new_state, pack_transfer
from sim._ctime import load as _load_csim
from sim._flows import Flows as _Flows
from sim._flows import GroupStatic
from sim._flows import group_static as _group_static
from sim._gathers import VIA_LLB, GatherRecord, plan_via_llb, step_gathers
from sim._host import HostSegment, host_ops
from sim._invariants import check_invariants
from sim._model import ComputeCost, GroupWork, group_cost
from sim._moves import Layout, fixed_plan, move_plan
from sim._plans import (
    StepPlan,
    group_token,
    make_plan,
    ops_token,
    placement_cores,
    plans_of,
    shift,
    step_facts,
    step_label,
    target_caches,
    transfer_flows,
    transfer_token,
)
from sim._resources import Reservations
from sim._result import DmaEvent, SimError, SimResult, step_record

if TYPE_CHECKING:
    from compiler.graph import Graph
    from compiler.schedule import GraphSchedule, GroupSpec, Transfer
    from compiler.target import Target

__all__ = ["run"]

Node = tuple[str, str, int]
_MODEL_INPUT = -1


class _Sim:
    """One simulation's state (lives for one ``run`` call)."""

    def __init__(self, graph: Graph, schedule: GraphSchedule, target: Target, record: bool,
                 memory: MemoryPlan) -> None:
        self.g, self.s, self.t, self.memory = graph, schedule, target, memory
        self.l1s, self.streamed = step_facts(memory)  # each step's L1 use, streamed inputs
        self.chip, self.moves, self.wcache = target_caches(target)
        # a group step's cost is a pure function of its key: kept with the step plans, so
        # the steps that gather tables (priced on the timeline) find it in later runs too
        self.plans = plans_of(graph, target)
        self.costs = self.plans
        self.res = Reservations(self.chip, record)
        n = self.chip.cores
        self.n = n
        self.l1_cap = target.l1.data_bytes
        self.half_wb = target.l1.weight_bytes / 2
        self.setup = target.dma.setup_cycles
        self.ddr_lat = target.ddr.latency_cycles
        self.hop_lat = target.noc.hop_latency_cycles
        # timing state
        self.core_start: MutableSequence[float] = [0.0] * n
        self.core_free: MutableSequence[float] = [0.0] * n
        self.core_usage: MutableSequence[float] = [0.0] * n
        self.mme: MutableSequence[float] = [0.0] * n
        self.vme: MutableSequence[float] = [0.0] * n
        self.noc_bytes = 0.0
        self.weight_bytes = 0.0
        self.records: list[list[object]] = []
        self.host: list[HostSegment] = []
        self.gathers: list[GatherRecord] = []
        self.llb_peak = 0.0
        self.llb_tables = 0.0  # bytes of tables copied into the LLB so far (LLB, via LLB)
        self.via_room = 0.0
        # the compiled step and plan maker (sim._ctime): the timing state in one array of
        # doubles, which the Python steps read and write through these slices
        self.csim, self.cpack = (_load_csim() if n <= MAX_CORES else None), load_pack()
        if self.csim is not None:
            self.cst, views = new_state(self.chip.bytes_per_cycle, n, self.l1_cap)
            (self.res.free_at, self.res.busy, self.core_start, self.core_free, self.core_usage,
             self.mme, self.vme) = views

    # ---- reservations ------------------------------------------------------------
    def latency_of(self, fl: _Flows) -> float:
        lat = self.setup + fl.hops * self.hop_lat
        if fl.ddr > 0:
            lat += self.ddr_lat
        return lat

    # ---- the run ---------------------------------------------------------------------
    def run(self) -> SimResult | SimError:
        g, s, _t = self.g, self.s, self.t
        deps, outs = chunk_dag(g, s)
        order: list[Node] = order_nodes(s)
        pos = {node: i for i, node in enumerate(order)}
        end_pos = len(order)
        out_nodes = {pos[o] for o in outs}
        self.ready: MutableSequence[float] = ([0.0] * end_pos if self.csim is None
                                               else array("d", bytes(8 * end_pos)))
        self.rec_of: dict[int, int] = {}
        groups = {gr.name: gr for gr in s.groups}
        transfers = {tr.name: tr for tr in s.transfers}
        self.labels = [step_label(st) for st in s.order]
        self.layouts: list[Layout] = []
        self.provides: list[str] = []
        self.cores_of: list[tuple[int, ...]] = []
        self.info_of: dict[str, GroupStatic] = {}  # by group name (its chunks share it)
        self.group_cores: set[tuple[int, ...]] = set()  # the group steps' core tuples
        # each node's layout token (sim._plans.layout_token) and first sample: the plans' keys
        self.toks: list[int] = []
        self.firsts: list[int] = []
        for node in order:
            if node[0] == "g":
                gr = groups[node[1]]
                lay = group_layout(gr, node[2], g.batch)
                self.layouts.append(lay)
                info = self.info_of.get(gr.name)
                if info is None:
                    info = self.info_of[gr.name] = _group_static(g, gr.ops, self.half_wb)
                self.provides.append(info.output)
                place = gr.chunks[node[2]]
                cores = placement_cores(place)
                self.cores_of.append(cores)
                self.group_cores.add(cores)
                self.toks.append(group_token(place, lay, cores))
            else:
                tr = transfers[node[1]]
                lay = transfer_layout(tr, g.batch)
                self.layouts.append(lay)
                self.provides.append(tr.tensor)
                cores = placement_cores(tr.placement)
                self.cores_of.append(cores)
                self.toks.append(transfer_token(tr, lay, cores, g.batch))
            self.firsts.append(lay[1][0][0])
        self.deps_of = {pos[n]: [pos[d] for d in ds] for n, ds in deps.items()}
        for i, node in enumerate(order):
            dep_idx = self.deps_of.get(i, [])
            if node[0] == "g":
                gr = groups[node[1]]
                err = self.group_step(i, gr, node[2], dep_idx)
            else:
                err = self.transfer_step(i, transfers[node[1]], dep_idx)
            if err is not None:
                return err
        for o in sorted(out_nodes):
            self.final_store(o)
        return self.result(end_pos)

    def label(self, i: int) -> str:
        return self.labels[i]

    # ---- steps ----------------------------------------------------------------------------
    def gate(self, cores: tuple[int, ...], incoming: dict[int, float]) -> float:
        """Earliest load start allowed by L1 room on the destination cores."""
        gate = 0.0
        for c in cores:
            inc = incoming.get(c, 0.0)
            if inc <= 0:
                continue
            t = self.core_start[c] if self.core_usage[c] + inc <= self.l1_cap else self.core_free[c]
            if t > gate:
                gate = t
        return gate

    def part_cost(self, gr: GroupSpec, spp: int, cores: int, step_cores: int,
                  remote: frozenset[int], tables: float, wait: float) -> ComputeCost:
        """Per-core compute cost of a part of ``cores`` cores running ``spp`` samples
        (the group's NPU ops: host ops are a host segment, :mod:`sim._host`), with
        ``tables`` bytes of embedding tables gathered in L1 from DDR and those via the
        LLB arriving ``wait`` cycles after compute starts."""
        key = ("cost", gr.ops, spp, cores, step_cores, remote, tables, wait)
        hit = self.costs.get(key)
        if hit is None:
            host = host_ops(self.g, gr.ops)
            ops = tuple(i for i in gr.ops if i not in host) if host else gr.ops
            hit = self.costs[key] = group_cost(self.g, ops, spp, cores, self.t, step_cores,
                                               remote, tables, wait, self.cpack)
        return hit

    def step_plan(self, k: int, gr: GroupSpec, spp: int, samples: int,
                  dep_idx: list[int], streamed_names: frozenset[str]
                  ) -> tuple[StepPlan, tuple[int, ...]]:
        """What group step ``k`` moves and computes regardless of timing (see
        :class:`StepPlan`), shared by every simulation of the graph on the target that
        runs the same op set on the same layout from the same sources.

        Layouts are keyed relative to the step's first sample: a movement plan compares
        sample ranges by their differences (integers), so every chunk of a group, and
        every schedule that runs it the same way, shares one plan. Also returns the steps
        providing the plan's ``kinds``, in order.
        """
        provides, toks, firsts = self.provides, self.toks, self.firsts
        by_tensor = {provides[d]: d for d in dep_idx}
        info = self.info_of[gr.name]
        off = firsts[k]
        got: list[tuple[int, int] | None] = []
        deps: list[int] = []
        for name, _, _ in info.inputs:
            d = by_tensor.get(name)
            if d is None:
                got.append(None)
                continue
            deps.append(d)
            got.append((toks[d], firsts[d] - off))
        # layouts by their tokens, a source's first sample relative to the step's: a short key
        key = (ops_token(gr.ops), samples, toks[k], streamed_names, tuple(got))
        plan: StepPlan | None = self.plans.get(key)
        if plan is None:
            layouts, cores_of = self.layouts, self.cores_of
            srcs = tuple(None if d is None else (shift(layouts[d], off), cores_of[d])
                         for d in map(by_tensor.get, (name for name, _, _ in info.inputs)))
            plan = self.plans[key] = make_plan(self, shift(layouts[k], off), cores_of[k], gr,
                                                    spp, samples, info, srcs, streamed_names)
        return plan, tuple(deps)

    def group_step(self, k: int, gr: GroupSpec, chunk: int, dep_idx: list[int]) -> SimError | None:
        place = gr.chunks[chunk]
        parts = place.core_bind
        cores = self.cores_of[k]
        samples = self.g.batch // gr.split
        spp = samples // len(parts)
        plan, deps = self.step_plan(k, gr, spp, samples, dep_idx, self.streamed[k])
        l1_bytes = self.l1s[k]
        pk = plan.packed
        if pk is not None and self.csim is not None:  # the compiled step (sim._ctime)
            if self.res.record:  # the timeline's events too
                out = self.csim.group_step(pk[0], self.cst, self.ready, deps, l1_bytes,
                                           self.noc_bytes, self.weight_bytes, self.res.events,
                                           self.labels[k])
            else:
                out = self.csim.group_step(pk[0], self.cst, self.ready, deps, l1_bytes,
                                           self.noc_bytes, self.weight_bytes)
            ls, le, start, end, top, self.noc_bytes, self.weight_bytes = out
            self.rec_of[k] = len(self.records)
            self.records.append([self.labels[k], "group", cores, ls, le, start, end, end, pk[1],
                                 pk[2], int(top), place.mem_scope])
            self.ready[k] = end
            return None
        info, work = plan.info, plan.work
        # when the data of each source scope is ready ("*": all inputs)
        ready: dict[str, float] = {"*": 0.0}
        if plan.kinds:
            by_tensor = {self.provides[d]: d for d in dep_idx}
            for name, kind in plan.kinds:
                t = self.ready[by_tensor[name]]
                if t > ready["*"]:
                    ready["*"] = t
                if t > ready.get(kind, 0.0):
                    ready[kind] = t
        usage = dict(l1_bytes)
        top = max(usage.values(), default=0.0)
        # compute, part by part: a part of n cores splits its samples' rows n ways; the
        # cores run synchronised, so the step ends when its slowest part ends
        loads = [(ready.get(kind, 0.0), fl) for kind, fl in plan.staged]
        streams = list(plan.streamed)
        # gathered rows, priced where each table is placed (L1, LLB or DDR: sim._gathers)
        l1_tables: list[tuple[int, float]] = []
        if work.gathers:
            l1_tables = self.gathers_of(k, work, spp, parts, cores, ready["*"], loads)
        tables = sum(b for _, b in l1_tables)
        ex = plan.ex
        if ex is not None:
            streams.append(ex)
            self.noc_bytes += ex.noc
        # the weight path carries the weights and the tables gathered in L1, each item at
        # most half the weight buffer, in op order: the first is loaded (double-buffered)
        # before compute, the rest streams during it (sim._gathers)
        first = info.first_tile
        via = l1_tables
        if l1_tables and l1_tables[0][0] < info.first_op:
            first, via = int(l1_tables[0][1]), l1_tables[1:]
        if first:
            if plan.first is not None:
                self.weight_bytes += plan.first.ddr
                loads.append((0.0, plan.first))
            else:
                loads.append((0.0, self.weight_flows(first, cores)))
        incoming: dict[int, float] = {}
        for _, fl in loads:
            for c, b in fl.incoming.items():
                incoming[c] = incoming.get(c, 0.0) + b
            self.noc_bytes += fl.noc
        # timing: loads may start during the previous step on these cores when L1 has room
        label = self.labels[k]
        gate = self.gate(cores, incoming)
        ls = le = max(gate, ready["*"])
        loads.sort(key=lambda x: x[0])  # first come, first served
        for i, (data, fl) in enumerate(loads):
            a, b = self.res.reserve(label, fl.flows, max(gate, data), self.latency_of(fl),
                                    " load")
            ls, le = (a, b) if i == 0 else (min(ls, a), max(le, b))
        start = max(le, ready["*"])
        for c in cores:
            if self.core_free[c] > start:
                start = self.core_free[c]
        # L1 tables via the LLB when they arrive sooner (sim._gathers.plan_via_llb)
        wait = 0.0
        if via:
            moved, wait = self.via_llb(label, via, cores, start)
            tables -= moved
        path = info.weights + tables
        if path > first:
            streams.append(self.weight_flows(path - first, cores))
        if plan.out is not None:
            streams.append(plan.out)
        cost_of = plan.cost_of
        if cost_of is None:
            cost_of = {n: self.part_cost(gr, spp, n, len(cores), plan.remote, tables, wait)
                       for n in {len(p) for p in parts}}
        slowest = max(cost_of.values(), key=lambda c: c.cycles)
        end = start + slowest.cycles
        # ops off the NPU: inputs over PCIe to the host, computed there, results back;
        # the step's cores wait for them
        host_cycles, host_fl, host_bytes = plan.host
        if host_cycles:
            self.host.append(HostSegment(
                self.label(k), tuple(self.g.ops[i].op_type for i in host_ops(self.g, gr.ops)),
                end, host_cycles, host_fl, host_bytes))
            end += host_cycles
        for fl in streams:
            _, b = self.res.reserve(label, fl.flows, start, self.latency_of(fl), " stream")
            end = max(end, b)
        for part in parts:
            cost = cost_of[len(part)]
            for c in part:
                self.core_start[c] = start
                self.core_free[c] = end
                self.core_usage[c] = usage[c]
                self.mme[c] += cost.mme_cycles
                self.vme[c] += cost.vme_cycles
        self.rec_of[k] = len(self.records)
        self.records.append([label, "group", cores, ls, le, start, end, end, slowest.mme_cycles,
                             slowest.vme_cycles, int(top), place.mem_scope])
        self.ready[k] = end
        return None

    def gathers_of(self, k: int, work: GroupWork, spp: int, parts: tuple[tuple[int, ...], ...],
                   cores: tuple[int, ...], data: float, loads: list[tuple[float, _Flows]]
                   ) -> list[tuple[int, float]]:
        """Add a step's gathered rows from the LLB or DDR to its loads (:mod:`sim._gathers`);
        return the tables gathered in L1 (op index, bytes), which join the weight path.

        A table may take the LLB that no step of the schedule uses (capacity minus the
        plan's peak: the same from the Python walk and the compiled one) and that no
        earlier step's tables took (their copies are ready at 0, so all may be resident).
        """
        llb_used = float(self.memory.peak_llb_bytes)
        # earlier steps' tables (copies ready at 0) may all still be in the LLB
        gp = step_gathers(self.g, work, self.label(k), spp, parts, cores, self.t, self.chip,
                          llb_used + self.llb_tables)
        self.gathers.extend(gp.records)
        # LLB free for tables via the LLB: every earlier step's tables may still be there
        self.via_room = self.t.llb.bytes - llb_used - gp.llb_table_bytes - self.llb_tables
        self.llb_tables += gp.llb_table_bytes
        if gp.llb_copy:
            copy = _Flows()
            copy.flows, copy.ddr = gp.llb_copy, gp.llb_copy_ddr
            _, copied = self.res.reserve(f"{self.label(k)} table to LLB", copy.flows, 0.0,
                                         self.latency_of(copy))
            self.weight_bytes += gp.llb_copy_ddr
            self.llb_peak = max(self.llb_peak, llb_used + self.llb_tables)
            rows = _Flows()
            rows.flows, rows.incoming = gp.llb_rows, gp.llb_rows_in
            loads.append((max(data, copied), rows))
        if gp.ddr_rows:
            rows = _Flows()
            rows.flows, rows.incoming, rows.ddr = gp.ddr_rows, gp.ddr_rows_in, gp.ddr_rows_ddr
            loads.append((data, rows))
            self.weight_bytes += gp.ddr_rows_ddr
        return gp.l1_tables

    def via_llb(self, label: str, cands: list[tuple[int, float]], cores: tuple[int, ...],
                start: float) -> tuple[float, float]:
        """Send a step's L1 tables DDR -> LLB -> weight buffers when they arrive sooner
        (:func:`sim._gathers.plan_via_llb`): the copy (ready at 0, after the step's staged
        loads), then the trip from the LLB. Returns (bytes moved so, cycles after ``start``
        the last of them arrives)."""
        chip, res = self.chip, self.res
        vp = plan_via_llb(cands, self.via_room, max(res.free_at[chip.ddr], res.free_at[chip.llb]),
                          max(res.free_at[c] for c in cores), start, self.t, len(cores))
        if vp is None:
            return 0.0, 0.0
        n = vp.nbytes
        res.reserve(f"{label} table to LLB", {chip.ddr: n, chip.llb: n}, 0.0,
                    self.setup + self.ddr_lat)
        trip = {c: n for c in cores}
        trip[chip.llb] = n if self.t.llb.broadcast else n * len(cores)
        _, arrival = res.reserve(f"{label} table to L1", trip, vp.trip_ready, self.setup)
        # the choice was made on this arrival: the plan re-derives the two reservations
        assert abs(arrival - vp.arrival) <= 1e-6 * max(1.0, arrival), (arrival, vp.arrival)
        self.weight_bytes += n
        self.llb_tables += n
        self.llb_peak = max(self.llb_peak, self.memory.peak_llb_bytes + self.llb_tables)
        names = {self.g.ops[op].name for op, _ in vp.tables}
        self.gathers = [replace(x, scope=VIA_LLB, ddr_bytes=x.table_bytes, arrival_cycles=arrival)
                        if x.step == label and x.op in names else x for x in self.gathers]
        return n, arrival - start

    def weight_flows(self, nbytes: float, cores: tuple[int, ...], count: bool = True) -> _Flows:
        """Weights from DDR into every core's weight buffer (LLB broadcast when available);
        ``count``: the bytes count as loaded by this simulation."""
        key = (nbytes, cores)
        fl = self.wcache.get(key)
        if fl is None:
            chip = self.chip
            fl = _Flows()
            fl.flows = {c: float(nbytes) for c in cores}
            if self.t.llb.broadcast:
                fl.flows[chip.ddr] = float(nbytes)
                fl.flows[chip.llb] = 2.0 * nbytes
            else:
                fl.flows[chip.ddr] = float(nbytes) * len(cores)
            fl.ddr = fl.flows[chip.ddr]
            self.wcache[key] = fl  # shared between simulations, never mutated
        if count:
            self.weight_bytes += fl.ddr
        return fl

    def transfer_step(self, k: int, tr: Transfer, dep_idx: list[int]) -> SimError | None:
        dst = self.layouts[k]
        cores = self.cores_of[k]
        # its flows, kept with the step plans (by tensor, layouts and cores), layouts relative
        # to its first sample as a group step's (the model input's layout is absolute)
        firsts, toks = self.firsts, self.toks
        off = firsts[k] if dep_idx else 0
        key = ("transfer", tr.tensor, toks[k], firsts[k] - off,
               tuple([(toks[d], firsts[d] - off) for d in dep_idx]))
        hit: tuple[_Flows, bytes | None] | None = self.plans.get(key)
        if hit is None:
            fl = transfer_flows(self, tr.tensor, dst, cores, dep_idx)
            pk = pack_transfer(self, fl, dst[0] == "L1", cores) if built() is not None else None
            hit = self.plans[key] = (fl, pk)
        fl, pk = hit
        if pk is not None and self.csim is not None:  # the compiled step (sim._ctime)
            if self.res.record:
                ls, le, usage, self.noc_bytes = self.csim.transfer_step(
                    pk, self.cst, self.ready, dep_idx, self.l1s[k], self.noc_bytes,
                    self.res.events, self.labels[k])
            else:
                ls, le, usage, self.noc_bytes = self.csim.transfer_step(
                    pk, self.cst, self.ready, dep_idx, self.l1s[k], self.noc_bytes)
            self.ready[k] = le
            self.rec_of[k] = len(self.records)
            self.records.append([self.labels[k], "transfer", cores, ls, le, ls, le, le, 0.0, 0.0,
                                 int(usage), dst[0]])
            return None
        data_ready = 0.0
        for d in dep_idx:
            data_ready = max(data_ready, self.ready[d])
        self.noc_bytes += fl.noc
        label = self.label(k)
        ready = max(data_ready, self.gate(cores, fl.incoming) if dst[0] == "L1" else 0.0)
        ls, le = self.res.reserve(label, fl.flows, ready, self.latency_of(fl))
        self.ready[k] = le
        self.rec_of[k] = len(self.records)
        usage = max((b for _, b in self.l1s[k]), default=0.0)
        self.records.append([label, "transfer", cores, ls, le, ls, le, le, 0.0, 0.0, int(usage),
                             dst[0]])
        return None

    def final_store(self, i: int) -> None:
        """Model outputs not placed in DDR go back to DDR for the host."""
        lay = self.layouts[i]
        if lay[0] == "DDR":
            return
        (sb, fb), fl, cp = sample_bytes(self.g, self.provides[i]), _Flows(), self.cpack
        fl.add(move_plan(self.chip, lay, ("DDR", lay[1]), self.moves, cp), sb, cp)
        if fb:
            fl.add(fixed_plan(self.chip, lay[0], self.cores_of[i], "DDR", (), self.moves), fb, cp)
        _, end = self.res.reserve(self.label(i), fl.flows, self.ready[i], self.latency_of(fl),
                                  " output")
        self.ready[i] = end
        self.records[self.rec_of[i]][7] = end

    # ---- result -----------------------------------------------------------------------------
    def result(self, n_steps: int) -> SimResult:
        t, chip, res = self.t, self.chip, self.res
        end = max([0.0, *self.ready, *self.core_free])
        launch = t.host.launch_overhead_us * t.clock_hz / 1e6
        latency = end + launch
        busy: dict[str, float] = {}
        for c in range(self.n):
            busy[f"core{c}.mme"] = self.mme[c]
            busy[f"core{c}.vme"] = self.vme[c]
        for r, name in enumerate(chip.names):
            busy[name] = res.busy[r]
        if self.host:
            busy["host"] = sum(h.cycles for h in self.host)
        bw = chip.bytes_per_cycle
        us = t.cycles_to_us(latency)
        batch = self.g.batch
        per_s = batch / (us * 1e-6) if us > 0 else 0.0
        steps = tuple(map(step_record, self.records))
        events = tuple(
            DmaEvent(label, chip.names[r], start, d, d * bw[r])
            for label, start, spans in res.events for r, d in spans
        ) if res.record else ()
        return SimResult(
            status="ok",
            batch=batch,
            clock_hz=t.clock_hz,
            latency_cycles=latency,
            latency_us=us,
            throughput_per_s=per_s,
            chip_throughput_per_s=per_s * t.chip.clusters,
            lower_bound_us=t.cycles_to_us(lower_bound_cycles(self.g, batch, t)),
            busy_cycles=busy,
            peak_l1_bytes=self.memory.peak_l1_bytes,
            peak_l1_bytes_per_core=self.memory.peak_l1_bytes_per_core,
            peak_llb_bytes=max(self.memory.peak_llb_bytes, int(self.llb_peak)),
            ddr_bytes=res.busy[chip.ddr] * bw[chip.ddr],
            noc_bytes=self.noc_bytes,
            llb_bytes=res.busy[chip.llb] * bw[chip.llb],
            weight_bytes_loaded=self.weight_bytes,
            steps=steps,
            dma_events=events,
            host_segments=tuple(self.host),
            gathers=tuple(self.gathers),
        )


def run(graph: Graph, schedule: GraphSchedule, target: Target, record: bool = True
        ) -> SimResult | SimError:
    """Validate and simulate; never raises for a bad schedule (see the module doc)."""
    # A schedule is frozen: once valid for a (graph, target), it stays valid (validated by an
    # earlier run, or decoded by a search space of this graph and target: its pre-check
    # marks it, valid by construction).
    try:
        if not known_valid(schedule, graph, target):
            schedule.validate(graph, target)
            mark_valid(schedule, graph, target)
    except ScheduleError as exc:
        graph = in_compute_dtype(graph, target)
        bound_us = target.cycles_to_us(lower_bound_cycles(graph, graph.batch, target))
        return SimError("invalid", str(exc), lower_bound_us=bound_us)
    sized = in_compute_dtype(graph, target)
    memory = plan_memory(sized, schedule, target)
    issue = memory.issue
    if issue is not None:
        return SimError(
            "capacity", issue.message, issue.resource, issue.step, issue.needed_bytes,
            issue.capacity_bytes, issue.live,
            target.cycles_to_us(lower_bound_cycles(sized, sized.batch, target)),
        )
    sim = _Sim(sized, schedule, target, record, memory)
    out = sim.run()
    if isinstance(out, SimResult):
        used: set[int] = set().union(*sim.group_cores)
        bad = check_invariants(out, sized, target, len(used))
        if bad is not None:
            return bad
    return out
