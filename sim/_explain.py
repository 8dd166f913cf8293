"""Where every microsecond above the lower bound goes: ``latency - bound`` in named terms.

The split is exact (the terms add up to the gap to rounding) and read from the
simulator's own accounting: the timeline (:class:`~sim._result.StepRecord`) and,
for each core of each group step, the compute cost the engine charged its part
(:func:`sim._model.group_cost`, same arguments as the engine).

The identity. Let ``N`` be the cluster's cores and ``E`` the end of the last step
or store (latency = ``E`` + launch; the bound = ``B`` + the same launch). Every
core is at every moment either inside a step or not, so
``N x E = sum over cores of (time in steps + time outside steps)``. A core's
time in one step (``end - start``) is, exactly:

* the cheapest engine time of its share: ``max(cheapest matrix, vector, move)``
  where the matrix share of an op is its whole-op granules
  (:func:`compiler.opshape.array_cycles`, one piece over the batch) times the
  core's fraction of the op, vector work at the lanes' rate, moves at the L1
  bandwidth (an op every core of a step repeats, unbatched, counts once over its
  copies);
* **granule padding** (and repeated unbatched work): the engines' time at the
  chosen shapes, ``max(mme, vme, move)`` of the core's part, minus that;
* **weights** arriving slower than the array needs them (``wbound`` above the engines;
  it counts the embedding tables gathered in L1 too, which pass the same weight buffer,
  and for tables that came via the LLB their arrival after compute start, read from
  the engine's records: the same choice);
* **pipeline fill and drain** (one output tile per op);
* **core imbalance in the step**: the slowest part of the step minus this part;
* **streams after compute**: the step's end (weights, outputs, halos and
  re-reads streaming on DMA/DDR/NoC) minus its compute.

Time outside steps: **waiting** before a step (loads, transfers, producers on
other cores; attributed to the step that waits), **cores idle at the end**
(after a core's last step until the last core finishes), **unused cores** (no
step at all), and the **output store** after the last core's compute.

Finally ``sum of the cheapest engine times = max(total matrix, vector, move) +
serialisation``: **matrix/vector serialisation** is what is lost because steps
do not overlap one engine's work with the other's as the totals would allow.
The **bound remainder** is ``max(total matrix, vector, move) / N - B``: the work
itself against the bound (negative where the bound counts fill, weights' arrival
or DDR that the terms above count again; positive where grouped convolutions
took a dearer engine than the bound's best split). Dividing by ``N``:
``E - B = sum of the terms``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from compiler.opshape import OpKind, array_cycles, op_shapes
from sim._dtype import in_compute_dtype

if TYPE_CHECKING:
    from compiler.graph import Graph
    from compiler.schedule import GraphSchedule
    from compiler.target import Target
    from sim._result import SimResult

__all__ = ["TERMS", "Edit", "Explanation", "GroupExplanation", "explain"]

#: Term names in report order, with what each means.
TERMS: dict[str, str] = {
    "granule padding": "engine time at the chosen per-core shapes minus at the cheapest "
                       "(whole-op granules; repeated unbatched work)",
    "weights": "weights (and tables gathered in L1) arriving slower than the engines "
               "need them",
    "matrix/vector serialisation": "steps running one engine's work after the other's "
                                   "instead of overlapping them",
    "pipeline fill and drain": "one output tile's latency per op per step",
    "core imbalance in steps": "cores of a step waiting for its slowest part",
    "streams after compute": "weights, outputs, halos and re-reads still streaming on "
                             "DMA/DDR/NoC after compute",
    "waiting for loads and producers": "cores idle before a step: staged loads, transfers, "
                                       "producers on other cores",
    "cores idle at the end": "cores done before the last core",
    "unused cores": "cores no step runs on",
    "output store": "model outputs copied to DDR after the last compute",
    "bound remainder": "the schedule's cheapest engine work minus the bound (negative: "
                       "the bound already counts fill, weights' arrival or DDR)",
}
_BETWEEN = "(between groups)"


@dataclass(frozen=True)
class GroupExplanation:
    """One group's share of the gap.

    Attributes:
        group: Group name (``(between groups)`` for terms no one group owns).
        terms_us: Term name -> µs (averaged over the cluster's cores).
        engine: What bounds its steps, weighted by time: ``matrix``, ``vector`` or
            ``move`` (the busiest engine of the slowest part), ``weights`` (their
            arrival holds that engine back by more than 10 %) or ``streams`` (the steps
            mostly wait on DMA/DDR/NoC after compute).
        steps: Its steps in the schedule.
    """

    group: str
    terms_us: dict[str, float]
    engine: str
    steps: int

    @property
    def total_us(self) -> float:
        """The group's share of the gap."""
        return sum(self.terms_us.values())


@dataclass(frozen=True)
class Edit:
    """One schedule edit, simulated.

    Attributes:
        description: What changes (``group_3: split 8 -> 4``).
        attacks: The term it targets.
        latency_us: Latency of the edited schedule (what simulating ``schedule`` gives).
        gain_us: Original latency minus ``latency_us``.
        schedule: The edited schedule.
    """

    description: str
    attacks: str
    latency_us: float
    gain_us: float
    schedule: GraphSchedule = field(repr=False)


@dataclass(frozen=True)
class Explanation:
    """``latency - bound`` of one schedule in named terms (see the module doc).

    Attributes:
        latency_us: Simulated latency (host launch included).
        bound_us: :func:`sim.lower_bound` of the batch.
        gap_us: ``latency_us - bound_us``.
        terms_us: Term name -> µs over the whole schedule; they sum to ``gap_us``.
        groups: Per group, largest share first.
        edits: Up to three edits attacking the largest terms, best gain first.
    """

    latency_us: float
    bound_us: float
    gap_us: float
    terms_us: dict[str, float]
    groups: tuple[GroupExplanation, ...]
    edits: tuple[Edit, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """Keyed JSON (``graphtune explain --json``)."""
        return {
            "latency_us": self.latency_us,
            "bound_us": self.bound_us,
            "gap_us": self.gap_us,
            "terms_us": dict(self.terms_us),
            "groups": [{"group": g.group, "engine": g.engine, "steps": g.steps,
                        "total_us": g.total_us, "terms_us": dict(g.terms_us)}
                       for g in self.groups],
            "edits": [{"description": e.description, "attacks": e.attacks,
                       "latency_us": e.latency_us, "gain_us": e.gain_us,
                       "schedule": e.schedule.to_json()} for e in self.edits],
        }


@dataclass
class _Acc:
    terms: dict[str, float] = field(default_factory=lambda: dict.fromkeys(TERMS, 0.0))
    engines: dict[str, float] = field(default_factory=dict)
    steps: int = 0
    work: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])  # cheapest m, v, move

    def add(self, name: str, cycles: float) -> None:
        self.terms[name] += cycles


def _cheapest(graph: Graph, ops: tuple[int, ...], samples: int, cores: int, repeats: int,
              target: Target) -> tuple[float, float, float]:
    """``(matrix, vector, move)`` cheapest cycles of one core's share of ``ops``.

    A batched op: ``samples`` samples over a part's ``cores`` cores, each core's share of
    the whole op at the bound's prices (:func:`compiler.opshape.array_cycles`: whole-op
    granules). An unbatched op is repeated by each of the ``repeats`` cores that run the
    group: each carries ``1 / repeats`` of it. A grouped convolution is priced on the
    engine the simulator picked for the core's rows, unpadded on the array.
    """
    from compiler.work_bound import grouped_array_cycles_per_row
    from sim._model import grouped_conv_cycles

    shapes = op_shapes(graph)
    batch = graph.batch
    mat, vec = target.matrix, target.vector
    lanes, tcpe = vec.lanes, vec.transcendental_cycles_per_element
    l1bw = target.l1.bytes_per_cycle
    m = v = mv = 0.0
    for i in ops:
        d = shapes[i]
        kind = d.kind
        if kind == OpKind.VIEW:
            continue
        frac = samples / batch / cores if d.batched else 1.0 / repeats
        total = d.amount * (batch if d.batched else 1)
        if kind == OpKind.MATRIX and d.groups > 1:
            rows = math.ceil(samples * d.amount / cores) if d.batched else math.ceil(d.amount)
            engine, _, _ = grouped_conv_cycles(d, rows, mat, lanes)
            if engine == "vector":
                v += total * d.groups * d.n * d.k / lanes * frac
            else:  # the array's price per row, the cheaper mapping, unpadded
                m += grouped_array_cycles_per_row(d, mat) * total * frac
        elif kind.is_matrix:
            m += array_cycles(d, batch, mat) * frac
        elif kind in (OpKind.VECTOR, OpKind.SPECIAL):
            v += total / lanes * (tcpe if kind == OpKind.SPECIAL else 1.0) * frac
        elif kind == OpKind.MOVE:
            mv += 2.0 * total / l1bw * frac
        else:
            mv += total / l1bw * frac
    return m, v, mv


def explain(graph: Graph, schedule: GraphSchedule, target: Target, result: SimResult,
            edits: int = 3, simulate_fn: Callable[..., Any] | None = None) -> Explanation:
    """Split ``result.latency - result.lower_bound`` into named terms (see the module doc).

    Args:
        graph: The model simulated.
        schedule: The schedule simulated (valid: ``result`` is its :class:`SimResult`).
        target: The chip.
        result: ``sim.simulate(graph, schedule, target)``.
        edits: How many suggested edits to return (each re-simulated); 0 for none.
        simulate_fn: The simulator to re-simulate edits with (default ``sim.simulate``).
    """
    from compiler.bound import lower_bound_cycles
    from compiler.capacity import plan_memory
    from sim._gathers import VIA_LLB
    from sim._model import group_cost, group_work

    g = in_compute_dtype(graph, target)
    n_cores = target.chip.cores_per_cluster
    batch = g.batch
    launch = target.host.launch_overhead_us * target.clock_hz / 1e6
    end = result.latency_cycles - launch
    bound = lower_bound_cycles(g, batch, target) - launch
    memory = plan_memory(g, schedule, target)
    groups = {gr.name: gr for gr in schedule.groups}
    accs: dict[str, _Acc] = {}
    gathers: dict[str, list[Any]] = {}
    for x in result.gathers:
        gathers.setdefault(x.step, []).append(x)

    def acc(name: str) -> _Acc:
        if name not in accs:
            accs[name] = _Acc()
        return accs[name]

    cheap_m = cheap_v = cheap_mv = 0.0
    core_last: dict[int, tuple[float, str]] = {}
    core_free: dict[int, float] = {}
    last_core_end = 0.0
    for k, (step, rec) in enumerate(zip(schedule.order, result.steps, strict=True)):
        if step.kind != "group":
            continue
        gr = groups[step.name]
        a = acc(gr.name)
        a.steps += 1
        place = gr.chunks[step.chunk]
        parts = place.core_bind
        samples = batch // gr.split
        spp = samples // len(parts)
        work = group_work(g, gr.ops, target)
        remote = work.remote_ops(memory.steps[k].streamed)
        # the tables the engine gathered in L1 (from DDR, or via the LLB arriving at a
        # cycle of the timeline): its own records, so the same choice
        tables = wait = 0.0
        for x in gathers.get(rec.name, ()):
            if x.scope == "L1":
                tables += x.table_bytes
            elif x.scope == VIA_LLB:
                wait = max(wait, x.arrival_cycles - rec.start_cycles)
        costs = {len(p): group_cost(g, gr.ops, spp, len(p), target, len(rec.cores), remote,
                                    tables, wait)
                 for p in parts}
        slowest = max(costs.values(), key=lambda c: c.cycles)
        span = rec.end_cycles - rec.start_cycles
        by_engine = {"matrix": slowest.mme_cycles, "vector": slowest.vme_cycles,
                     "move": slowest.move_cycles}
        top = max(by_engine, key=by_engine.__getitem__)
        if slowest.weight_bound_cycles > by_engine[top] * 1.1:  # weights hold it back >10 %
            top = "weights"
        a.engines[top] = a.engines.get(top, 0.0) + slowest.cycles * len(rec.cores)
        a.engines["streams"] = a.engines.get("streams", 0.0) + (span - slowest.cycles) * len(
            rec.cores)
        # every core of every chunk repeats the group's unbatched ops
        repeats = sum(len(ch.cores) for ch in gr.chunks)
        part_of = {core: part for part in parts for core in part}  # overlapping: the last
        for part in parts:
            c = costs[len(part)]
            cm, cv, cmv = _cheapest(g, gr.ops, spp, len(part), repeats, target)
            engines = max(c.mme_cycles, c.vme_cycles, c.move_cycles)
            cheapest = max(cm, cv, cmv)
            for core in part:
                if part_of[core] is not part:
                    continue
                cheap_m += cm
                cheap_v += cv
                cheap_mv += cmv
                a.work[0] += cm
                a.work[1] += cv
                a.work[2] += cmv
                a.add("matrix/vector serialisation", cheapest)  # minus the totals, below
                a.add("granule padding", engines - cheapest)
                a.add("weights", max(engines, c.weight_bound_cycles) - engines)
                a.add("pipeline fill and drain", c.fill_cycles)
                a.add("core imbalance in steps", slowest.cycles - c.cycles)
                a.add("streams after compute", span - slowest.cycles)
                prev = core_free.get(core, 0.0)
                a.add("waiting for loads and producers", rec.start_cycles - prev)
                core_free[core] = rec.end_cycles
                core_last[core] = (rec.end_cycles, gr.name)
        last_core_end = max(last_core_end, rec.end_cycles)
    between = acc(_BETWEEN)
    for core in range(n_cores):
        if core in core_last:
            t_end, name = core_last[core]
            acc(name).add("cores idle at the end", last_core_end - t_end)
            between.add("output store", end - last_core_end)
        else:
            between.add("unused cores", end)
    # serialisation: the per-core-step cheapest maxima minus the max of the totals, inside
    # each group and, for the rest, between groups
    per_group = 0.0
    for name, a in accs.items():
        if name != _BETWEEN:
            a.add("matrix/vector serialisation", -max(a.work))
            per_group += max(a.work)
    work_total = max(cheap_m, cheap_v, cheap_mv)
    between.add("matrix/vector serialisation", per_group - work_total)
    between.add("bound remainder", work_total - n_cores * bound)
    us = target.cycles_to_us
    terms = dict.fromkeys(TERMS, 0.0)
    out_groups = []
    for name, a in accs.items():
        tus = {t: us(v / n_cores) for t, v in a.terms.items() if v != 0.0}
        for t, v in a.terms.items():
            terms[t] += us(v / n_cores)
        eng = max(a.engines, key=a.engines.__getitem__) if a.engines else "-"
        out_groups.append(GroupExplanation(name, tus, eng, a.steps))
    out_groups.sort(key=lambda x: -x.total_us)
    expl = Explanation(result.latency_us, result.lower_bound_us,
                       result.latency_us - result.lower_bound_us, terms, tuple(out_groups))
    if edits:
        found = suggest_edits(g, schedule, target, expl, edits, simulate_fn)
        expl = Explanation(expl.latency_us, expl.bound_us, expl.gap_us, expl.terms_us,
                           expl.groups, found)
    return expl


def _rebuilt(graph: Graph, schedule: GraphSchedule, groups: list[Any], source: str
             ) -> GraphSchedule:
    """The schedule with ``groups`` replaced, transfers re-derived, the same kind of order."""
    from compiler.errors import GraphtuneError
    from compiler.schedule import make_schedule

    keep = {t.name: t.placement for t in schedule.transfers}
    try:
        s = make_schedule(graph, groups, order=list(schedule.order),
                          transfer_placements=keep, source=source)
        s.validate(graph)
        return s
    except GraphtuneError:  # the derived transfers changed: a fresh depth-first order
        return make_schedule(graph, groups, order="depth", source=source)


def _candidates(graph: Graph, schedule: GraphSchedule, target: Target, name: str,
                attacks: str) -> list[tuple[str, str, GraphSchedule]]:
    """Single edits of group ``name``: output scope, cores per part, all cores, merging
    with its consumer group, split halved or doubled."""
    from compiler.auto import core_bind_for
    from compiler.errors import GraphtuneError
    from compiler.schedule import GroupSpec, Placement

    out: list[tuple[str, str, GraphSchedule]] = []
    idx = next(i for i, gr in enumerate(schedule.groups) if gr.name == name)
    gr = schedule.groups[idx]
    cores = target.chip.cores_per_cluster
    scope = gr.chunks[0].mem_scope
    scopes = "/".join(dict.fromkeys(ch.mem_scope for ch in gr.chunks))

    def with_group(new: Any) -> list[Any]:
        groups = list(schedule.groups)
        groups[idx] = new
        return groups

    for sc in ("L1", "LLB", "DDR"):
        if any(ch.mem_scope != sc for ch in gr.chunks):
            new = GroupSpec(gr.name, gr.ops, gr.split,
                            tuple(Placement(sc, ch.core_bind) for ch in gr.chunks))
            out.append((f"{name}: every chunk's output in {sc} (were {scopes})",
                        "waiting for loads and producers" if sc == "L1" else attacks,
                        _rebuilt(graph, schedule, with_group(new), "explain")))
    samples = graph.batch // gr.split
    for cpp in (c for c in range(1, cores + 1) if cores % c == 0):
        parts = cores // cpp
        if samples % parts:
            continue
        b = tuple(tuple(range(p * cpp, (p + 1) * cpp)) for p in range(parts))
        if all(ch.core_bind == b for ch in gr.chunks):
            continue
        new = GroupSpec(gr.name, gr.ops, gr.split,
                        tuple(Placement(ch.mem_scope, b) for ch in gr.chunks))
        out.append((f"{name}: {parts} part(s) of {cpp} core(s) per chunk",
                    "granule padding", _rebuilt(graph, schedule, with_group(new), "explain")))
    bind = core_bind_for(samples, cores)
    if any(ch.core_bind != bind for ch in gr.chunks):
        new = GroupSpec(gr.name, gr.ops, gr.split,
                        tuple(Placement(ch.mem_scope, bind) for ch in gr.chunks))
        out.append((f"{name}: every chunk on all {cores} cores "
                    f"({len(bind)} part(s) of {len(bind[0])})",
                    "cores idle at the end", _rebuilt(graph, schedule, with_group(new), "explain")))
    # merge with the group that consumes its output (fewer steps, no round trip of it)
    out_t = {graph.ops[i].output for i in gr.ops}
    inside = set(gr.ops)
    for j, other in enumerate(schedule.groups):
        if j == idx or not any(t in out_t for i in other.ops for t in graph.ops[i].inputs):
            continue
        merged = GroupSpec(gr.name, tuple(sorted(inside | set(other.ops))), gr.split, gr.chunks)
        groups = [merged if k == idx else g2 for k, g2 in enumerate(schedule.groups) if k != j]
        try:
            out.append((f"{name}: merged with {other.name}", "matrix/vector serialisation",
                        _rebuilt(graph, schedule, groups, "explain")))
        except GraphtuneError:
            pass
        break
    for split in (gr.split // 2, gr.split * 2):
        if split < 1 or graph.batch % split or split == gr.split:
            continue
        b = core_bind_for(graph.batch // split, cores)
        new = GroupSpec(gr.name, gr.ops, split, tuple(Placement(scope, b) for _ in range(split)))
        out.append((f"{name}: split {gr.split} -> {split} (chunks on all cores, outputs in "
                    f"{scope})", "granule padding" if split < gr.split else attacks,
                    _rebuilt(graph, schedule, with_group(new), "explain")))
    return out


def suggest_edits(graph: Graph, schedule: GraphSchedule, target: Target, expl: Explanation,
                  count: int = 3, simulate_fn: Callable[..., Any] | None = None
                  ) -> tuple[Edit, ...]:
    """Up to ``count`` single edits of the groups with the largest shares, each simulated.

    For the groups owning most of the gap (up to four), every single edit of their
    output scope, their cores per part, their cores (all of the cluster, as the
    automatic levels bind), a merge with the group consuming their output and their
    split (halved, doubled) is built and simulated; the ``count`` best, at most
    one per group, are returned with the latency simulating them gives (an edit that
    does not run, or does not gain, is still listed if nothing better exists).
    """
    from compiler.errors import GraphtuneError
    from sim import SimResult, simulate

    run = simulate_fn or simulate
    tried: list[Edit] = []
    owners = [gx for gx in expl.groups if gx.group != _BETWEEN][:4]
    for gx in owners:
        top = max(gx.terms_us, key=gx.terms_us.__getitem__) if gx.terms_us else ""
        try:
            cands = _candidates(graph, schedule, target, gx.group, top)
        except GraphtuneError:
            continue
        best: Edit | None = None
        for desc, attacks, s in cands:
            r = run(graph, s, target, timeline=False)
            if not isinstance(r, SimResult):
                continue
            e = Edit(desc, attacks, r.latency_us, expl.latency_us - r.latency_us, s)
            if best is None or e.gain_us > best.gain_us:
                best = e
        if best is not None:
            tried.append(best)
    tried.sort(key=lambda e: -e.gain_us)
    return tuple(tried[:count])
