"""Issue 25 item 7: an independent DDR byte count equals the simulator's ``ddr_bytes``.

The count below is written from the graph and the schedule alone, from the rules
in ``sim/README.md`` ("Data movement"), without the simulator's movement plans,
flows or reservations:

* **weights**: every group step loads its group's weights once (the LLB broadcasts
  them to the cores: DDR pays once per step; gather tables excluded);
* **inputs**: a group step reads each input that lives in DDR (a model input, or a
  provider placed in DDR) for its own samples, ``bytes per sample x samples``, once
  more per extra weight tile of an op re-reading it while it streams (a matrix op
  with weights over half the weight buffer whose input, views followed, comes from
  outside the group); an unbatched input in DDR is read once per core;
* **outputs**: a step placed in DDR writes its samples (an unbatched result once);
* **transfers**: a split or concat moves the samples it takes from each source
  between scopes; only the DDR side counts, and DDR to DDR is a view;
* **gathers**: each gather's table once when read from L1 or the LLB, otherwise its
  rows at DDR burst granularity (rows per core rounded up);
* **the final store**: a model output not placed in DDR is copied there.

Random schedules of every zoo model (small batches); a larger run is behind ``slow``.
"""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler import zoo
from compiler.capacity import in_compute_dtype
from compiler.derive import chunk_dag, group_io
from compiler.errors import ScheduleError
from compiler.footprint import GATHER_OPS, sample_bytes, streamable_inputs
from compiler.graph import Graph
from compiler.layout import group_layout, input_layout, part_ranges, transfer_layout
from compiler.optable import op_spec
from compiler.schedule import GraphSchedule
from compiler.target import Target
from compiler.views import reads_from_outside, view_source
from sim import SimResult, simulate
from tests.sim.random_schedules import mutate, random_schedule
from tests.sim.test_explain import graph  # every zoo model, reduced, small batches

MODELS = sorted(e.name for e in zoo.list_models())


def _samples(layout: tuple[str, tuple[tuple[int, int, tuple[tuple[int, ...], ...]], ...]]
             ) -> list[tuple[int, int]]:
    return [(lo, hi) for lo, hi, _ in part_ranges(layout[1])]


def _overlap(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    return sum(max(0, min(ah, bh) - max(al, bl)) for al, ah in a for bl, bh in b)


def _cores(layout: tuple[str, tuple[tuple[int, int, tuple[tuple[int, ...], ...]], ...]]
           ) -> tuple[int, ...]:
    return tuple(c for _, _, parts in layout[1] for p in parts for c in p)


def independent_ddr(g0: Graph, s: GraphSchedule, t: Target, r: SimResult) -> dict[str, float]:
    """DDR bytes by kind, from the graph, the schedule and the rules above."""
    g = in_compute_dtype(g0, t)
    deps, _ = chunk_dag(g, s)
    groups = {gr.name: gr for gr in s.groups}
    transfers = {tr.name: tr for tr in s.transfers}
    half_wb = t.l1.weight_bytes / 2
    burst = max(1, t.ddr.burst_bytes)
    assert t.llb.broadcast  # the count below assumes it (the default target)

    def node_of(step: object) -> tuple[str, str, int]:
        kind = "g" if step.kind == "group" else "t"  # type: ignore[attr-defined]
        return (kind, step.name, step.chunk if kind == "g" else 0)  # type: ignore[attr-defined]

    def layout(node: tuple[str, str, int]):  # type: ignore[no-untyped-def]
        if node[0] == "g":
            return group_layout(groups[node[1]], node[2], g.batch)
        return transfer_layout(transfers[node[1]], g.batch)

    def provides(node: tuple[str, str, int]) -> str:
        if node[0] == "g":
            return group_io(g, groups[node[1]].ops).outputs[0]
        return transfers[node[1]].tensor

    out: dict[str, float] = {k: 0.0 for k in
                             ("weights", "inputs", "outputs", "transfers", "gathers", "store")}
    last_layout: dict[str, tuple[str, object]] = {}
    for step in s.order:
        node = node_of(step)
        lay = layout(node)
        if node[0] == "g":
            gr = groups[node[1]]
            io = group_io(g, gr.ops)
            weights = {w for i in gr.ops if g.ops[i].op_type not in GATHER_OPS
                       for w in g.ops[i].weights}
            out["weights"] += sum(g.nbytes(w) for w in weights)
            mine = _samples(lay)
            streamable = streamable_inputs(g, gr.ops)
            for name in io.inputs:
                sb, fb = sample_bytes(g, name)
                srcs = [d for d in deps.get(node, []) if provides(d) == name]
                src_lays = [layout(d) for d in srcs] or [input_layout(g.batch)]
                passes = 1
                if all(sl[0] != "L1" for sl in src_lays) and name in streamable:
                    for i in gr.ops:
                        op = g.ops[i]
                        wb = g.weight_bytes_of(op)
                        if op_spec(op.op_type).unit == "matrix" and wb > half_wb and op.inputs \
                                and reads_from_outside(g, gr.ops, op.inputs[0]) \
                                and view_source(g, gr.ops, op.inputs[0]) == name:
                            passes += math.ceil(wb / half_wb) - 1
                for sl in src_lays:
                    if sl[0] != "DDR":
                        continue
                    out["inputs"] += sb * _overlap(_samples(sl), mine) * passes
                    out["inputs"] += fb * len(_cores(lay)) * passes
            if lay[0] == "DDR":
                osb, ofb = sample_bytes(g, io.outputs[0])
                out["outputs"] += osb * sum(hi - lo for lo, hi in mine) + ofb
        else:
            tr = transfers[node[1]]
            sb, fb = sample_bytes(g, tr.tensor)
            srcs = deps.get(node, []) or [None]
            for d in srcs:
                sl = layout(d) if d is not None else input_layout(g.batch)
                if (sl[0] == "DDR") != (lay[0] == "DDR"):
                    out["transfers"] += sb * _overlap(_samples(sl), _samples(lay))
                    # an unbatched tensor: every destination core reads its own copy
                    out["transfers"] += fb * (len(_cores(lay)) if lay[0] == "L1" else 1)
        last_layout[provides(node)] = (lay[0], node)
    for rec in r.gathers:
        if rec.scope != "DDR":
            out["gathers"] += rec.table_bytes
    # rows from DDR: recount each such step's rows from the graph and the placement
    by_label = {rec.step for rec in r.gathers if rec.scope == "DDR"}
    for step in s.order:
        if step.kind != "group":
            continue
        label = f"{step.name}[{step.chunk}]"
        if label not in by_label:
            continue
        gr = groups[step.name]
        parts = gr.chunks[step.chunk].core_bind
        spp = g.batch // gr.split // len(parts)
        for i in gr.ops:
            op = g.ops[i]
            if op.op_type not in GATHER_OPS:
                continue
            rec = next(x for x in r.gathers if x.step == label and x.op == op.name)
            if rec.scope != "DDR":
                continue
            if op.weights:  # the zoo's tables are gathered along axis 0
                table = op.weights[0]
                row = max(1, g.nbytes(table) // max(1, g.tensors[table].shape[0]))
            else:  # from an activation: one output row at a time
                row = max(1, g.nbytes(op.output) // max(1, g.tensors[op.output].elements)
                          * g.tensors[op.output].shape[-1])
            per_sample, fixed = sample_bytes(g, op.output)
            for p in parts:
                n = math.ceil(spp * per_sample / row / len(p)) if per_sample \
                    else math.ceil(fixed / row)
                out["gathers"] += n * len(p) * math.ceil(row / burst) * burst
    for name in g.outputs:
        scope, node = last_layout[name]
        if scope != "DDR":
            sb, fb = sample_bytes(g, name)
            out["store"] += sb * g.batch + fb
    return out


def check(name: str, seed: int, mutations: int) -> None:
    g = graph(name)
    t = Target.default()
    rng = random.Random(seed)
    for _ in range(20):  # until a schedule that runs (about half of the random ones fit)
        try:
            s = random_schedule(g, rng, 8, max_split=g.batch)
            for _ in range(mutations):
                s = mutate(g, s, rng, 8, max_split=g.batch)
        except ScheduleError:
            continue  # the random moves made no valid schedule
        r = simulate(g, s, t, timeline=False)
        if not isinstance(r, SimResult):
            continue  # an overflowing schedule moves no bytes
        count = independent_ddr(g, s, t, r)
        assert sum(count.values()) == pytest.approx(r.ddr_bytes, rel=1e-9, abs=1e-3), \
            (count, r.ddr_bytes)
        assert r.latency_us >= r.lower_bound_us * (1 - 1e-9)
        return
    pytest.fail(f"{name}: no runnable schedule in 20 random ones (seed {seed})")


@pytest.mark.parametrize("name", MODELS)
@settings(max_examples=4, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 1))
def test_an_independent_ddr_count_equals_the_simulators(name: str, seed: int) -> None:
    check(name, seed, 2)


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 1))
def test_an_independent_ddr_count_equals_the_simulators_large(name: str, seed: int) -> None:
    check(name, seed, 6)
