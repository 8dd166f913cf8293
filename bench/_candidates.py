"""Random candidate schedules for the cost-model bench (until ``search_space`` lands on main).

A candidate regroups the graph at a random subset of its single-tensor cut points
(where one tensor crosses: ResNet's residual adds, BERT's block ends), gives each
group a random split factor (a divisor of the batch; 1 when an op mixes samples),
a random scope per chunk output and an even core binding (cores in {1, 2, 4, 8},
parts dividing the chunk's samples, a random rotation of the core ids), and a
depth-first or breadth-first order. :func:`mutate` changes one of those choices.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from math import gcd

import numpy as np

from compiler.auto import fit_to_target
from compiler.capacity import check_capacity
from compiler.derive import group_io, make_schedule
from compiler.errors import ScheduleError
from compiler.footprint import group_footprint
from compiler.graph import Graph
from compiler.schedule import GraphSchedule, GroupSpec, Placement
from compiler.target import Target

SCOPES = ("DDR", "LLB", "L1")


def single_tensor_cuts(graph: Graph) -> list[int]:
    """Op indices after which exactly one tensor is live (the guide's group boundaries)."""
    last: dict[str, int] = {}
    for op in graph.ops:
        for t in op.inputs:
            last[t] = op.index
    for t in graph.outputs:
        last[t] = len(graph.ops)
    born = {op.output: op.index for op in graph.ops}
    for t in graph.inputs:
        born[t] = -1
    events: dict[int, int] = {}
    for t, b in born.items():
        lu = last.get(t, b)
        if lu > b:
            events[b] = events.get(b, 0) + 1
            events[lu] = events.get(lu, 0) - 1
    live = events.get(-1, 0)
    cuts = []
    for op in graph.ops:
        live += events.get(op.index, 0)
        if live == 1 and op.index < len(graph.ops) - 1:
            cuts.append(op.index)
    return cuts


@dataclass(frozen=True)
class Genome:
    """A candidate's choices: boundaries (cut positions kept) and per-group settings."""

    bounds: tuple[int, ...]  # last op index of each group
    splits: tuple[int, ...]
    scopes: tuple[tuple[str, ...], ...]  # per group, per chunk
    cores: tuple[int, ...]  # cores per chunk (1, 2, 4, 8)
    parts: tuple[int, ...]  # parts per chunk
    rot: tuple[int, ...]  # rotation of the core ids
    order: str


class Candidates:
    """Random schedules and mutations for one graph on one target."""

    def __init__(self, graph: Graph, target: Target, repair: bool = True,
                 max_split: int = 64) -> None:
        self.g, self.t = graph, target
        self.repair = repair
        self.max_split = max_split
        self.cuts = single_tensor_cuts(graph)
        self.n_cores = target.chip.cores_per_cluster
        self.batch = graph.batch
        self.core_counts = [d for d in range(1, self.n_cores + 1) if self.n_cores % d == 0]

    # ---- genomes -----------------------------------------------------------------------
    def splittable(self, first: int, last: int) -> bool:
        ops = range(first, last + 1)
        if not all(self.g.ops[i].batch_separable for i in ops):
            return False
        out = group_io(self.g, tuple(ops)).outputs
        return len(out) == 1 and self.g.tensors[out[0]].batched

    def random_group(self, first: int, last: int, rng: np.random.Generator
                     ) -> tuple[int, tuple[str, ...], int, int, int]:
        divs = [d for d in range(1, min(self.batch, self.max_split) + 1) if self.batch % d == 0]
        if not self.splittable(first, last):
            divs = [1]
        fp = group_footprint(self.g, tuple(range(first, last + 1)))
        cap = self.t.l1.data_bytes
        # (split, cores, parts) whose working set (inputs staged) fits a core's L1
        fits = [(d, c, p) for d in divs for c in self.core_counts for p in range(1, c + 1)
                if c % p == 0 and (self.batch // d) % p == 0
                and fp.peak_bytes((self.batch // d) // p, c // p) <= cap]
        if fits and rng.random() < 0.9:
            split, cores, parts = fits[int(rng.integers(len(fits)))]
            allowed = self.allowed_scopes(last)
            # scopes whose result leaves room next to other live results (fewer repairs)
            out_s = fp.output_sample_bytes + fp.output_fixed_bytes
            spp = self.batch // split // parts
            if out_s * spp / (cores // parts) > self.t.l1.data_bytes * 0.3:
                allowed = [a for a in allowed if a != "L1"] or allowed
            if out_s * self.batch // split > self.t.llb.bytes * 0.3:
                allowed = [a for a in allowed if a != "LLB"] or allowed
            scopes = self._scopes(split, allowed, rng)
            return split, scopes, cores, parts, int(rng.integers(self.n_cores))
        split = int(rng.choice(divs))
        allowed = self.allowed_scopes(last)
        scopes = self._scopes(split, allowed, rng)
        samples = self.batch // split
        cores = int(rng.choice(self.core_counts))
        parts_opts = [p for p in range(1, cores + 1) if cores % p == 0 and samples % p == 0]
        parts = int(rng.choice(parts_opts))
        rot = int(rng.integers(self.n_cores))
        return split, scopes, cores, parts, rot

    @staticmethod
    def _scopes(split: int, allowed: list[str], rng: np.random.Generator) -> tuple[str, ...]:
        if rng.random() < 0.5:
            return (str(rng.choice(allowed)),) * split
        return tuple(str(rng.choice(allowed)) for _ in range(split))

    def allowed_scopes(self, last: int) -> list[str]:
        op = self.g.ops[last]
        return [s for s in SCOPES if not op.on_npu or s in op.allowed_scopes] or ["DDR"]

    def sample_genome(self, rng: np.random.Generator) -> Genome:
        keep = rng.random()  # density of boundaries, itself random
        ends = [c for c in self.cuts if rng.random() < keep] + [len(self.g.ops) - 1]
        return self._fill(tuple(ends), rng, order=str(rng.choice(["depth", "breadth"])))

    def _fill(self, ends: tuple[int, ...], rng: np.random.Generator, order: str,
              keep: dict[tuple[int, int], tuple[int, tuple[str, ...], int, int, int]] | None = None
              ) -> Genome:
        cols: list[list[object]] = [[], [], [], [], []]
        first = 0
        for last in ends:
            choice = (keep or {}).get((first, last)) or self.random_group(first, last, rng)
            for col, v in zip(cols, choice):
                col.append(v)
            first = last + 1
        return Genome(ends, *(tuple(c) for c in cols), order)  # type: ignore[arg-type]

    def schedule(self, gen: Genome) -> GraphSchedule:
        groups = []
        first = 0
        for i, last in enumerate(gen.bounds):
            split, cores, parts = gen.splits[i], gen.cores[i], gen.parts[i]
            ids = [(gen.rot[i] + c) % self.n_cores for c in range(cores)]
            per = cores // parts
            bind = tuple(tuple(ids[p * per:(p + 1) * per]) for p in range(parts))
            chunks = tuple(Placement(gen.scopes[i][c], bind) for c in range(split))
            groups.append(GroupSpec(f"group_{i}", tuple(range(first, last + 1)), split, chunks))
            first = last + 1
        s = make_schedule(self.g, groups, order=gen.order, source="bench random")
        return self.fit(s) if self.repair else s

    def fit(self, s: GraphSchedule) -> GraphSchedule:
        """Demote whole groups' results (largest live first) until it fits, then let
        :func:`compiler.auto.fit_to_target` finish (it demotes one chunk per round: slow)."""
        for _ in range(12):
            issue = check_capacity(self.g, s, self.t)
            if issue is None:
                return s
            steps = [s.order[i] for i, _ in sorted(issue.live_steps, key=lambda x: -x[1])]
            names = {st.name for st in steps if st.kind == "group"}
            if not names:
                break
            slower = {"L1": "LLB", "LLB": "DDR", "DDR": "DDR"}
            groups = tuple(
                replace(g, chunks=tuple(Placement(slower[p.mem_scope], p.core_bind)
                                        for p in g.chunks)) if g.name in names else g
                for g in s.groups)
            s = replace(s, groups=groups)
        return fit_to_target(self.g, s, self.t)

    # ---- moves -------------------------------------------------------------------------
    def mutate_genome(self, gen: Genome, rng: np.random.Generator) -> Genome:
        groups = {}
        first = 0
        for i, last in enumerate(gen.bounds):
            groups[(first, last)] = (gen.splits[i], gen.scopes[i], gen.cores[i], gen.parts[i],
                                     gen.rot[i])
            first = last + 1
        move = rng.integers(4)
        ends = list(gen.bounds)
        order = gen.order
        if move == 0 and self.cuts:  # move a boundary: add or remove one cut
            c = int(rng.choice(self.cuts))
            if c in ends:
                ends.remove(c)
            else:
                ends = sorted([*ends, c])
            return self._fill(tuple(ends), rng, order, groups)
        if move == 3:
            order = "breadth" if order == "depth" else "depth"
            return Genome(gen.bounds, gen.splits, gen.scopes, gen.cores, gen.parts, gen.rot, order)
        # re-draw one group's split/scopes (move 1) or binding (move 2)
        i = int(rng.integers(len(ends)))
        key = list(groups)[i]
        new = self.random_group(*key, rng)
        old = groups[key]
        if move == 1:
            samples = self.batch // new[0]
            parts = old[3] if samples % old[3] == 0 else new[3]
            groups[key] = (new[0], new[1], old[2], parts, old[4])
        else:
            groups[key] = (old[0], old[1], new[2], new[3] if (self.batch // old[0]) % new[3] == 0
                           else 1, new[4])
        return self._fill(tuple(ends), rng, order, groups)

    def sample(self, rng: np.random.Generator) -> tuple[Genome, GraphSchedule]:
        while True:
            gen = self.sample_genome(rng)
            try:
                return gen, self.schedule(gen)
            except ScheduleError:
                continue

    def mutate(self, gen: Genome, rng: np.random.Generator) -> tuple[Genome, GraphSchedule]:
        while True:
            new = self.mutate_genome(gen, rng)
            if new == gen:
                continue
            try:
                return new, self.schedule(new)
            except ScheduleError:
                continue


def _gcd(a: int, b: int) -> int:
    return gcd(a, b)
