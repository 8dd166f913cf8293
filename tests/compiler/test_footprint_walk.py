"""``compiler.footprint._profile`` walks per-chain rows built once per op set
(``_chain_rows``); here the walk as it was written before (over the chains' ops and
tensor names, every lookup per call) is the reference: every op set tried, every
subset of its streamable inputs, output streamed out or kept, inputs held or not,
gives the same profile, peak, peak op and chain points (integers: exact)."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest

from compiler import footprint
from compiler.capacity import in_compute_dtype
from compiler.footprint import _analyse, _prune, _streams, is_elementwise
from compiler.graph import Graph
from compiler.target import Target
from search_space import build_space
from tests.search_space.conftest import small_graph
from tests.sim.conftest import zoo_graph


def _reference(graph: Graph, an: footprint._Analysis, streamed: frozenset[str], stream_output: bool,
               held: bool) -> tuple[object, ...]:
    """The walk as written before the per-chain rows (the reference)."""
    size, root, seq = an.size, an.root, an.seq
    zero = (0, 0)
    last = dict(an.last)
    n_chains = len(an.chains)
    for t in an.outside_use:
        if not stream_output:
            last[t] = n_chains
    live_s = live_f = 0
    for t in an.group_inputs:
        if t in streamed:
            continue
        s, f = size.get(t, zero)
        live_s += s
        live_f += f
    points: list[tuple[int, int]] = []
    raw = []
    best_s, best_f, best_op = 0, 0, -1
    for c, chain in enumerate(an.chains):
        out = seq[chain[-1]].output
        out_s, out_f = size[out]
        if stream_output and out in an.outside_use and last.get(out, c) <= c:
            out_s = out_f = 0
        dying: dict[str, None] = {}
        for p in chain:
            for t in seq[p].inputs:
                r = root[t]
                if r in an.virtual or r in streamed or last.get(r) != c:
                    continue
                if held and r not in an.produced:
                    continue
                dying[r] = None
        reusable = [t for t in dying if t in an.produced or (t in an.private and not held)]
        anchor = seq[chain[0]]
        first = root[anchor.inputs[0]] if anchor.inputs else None
        during_s, during_f = live_s + out_s, live_f + out_f
        if len(chain) > 1 or is_elementwise(seq[chain[-1]], graph):
            if any(size[t][0] >= out_s and size[t][1] >= out_f for t in reusable):
                during_s, during_f = live_s, live_f
        if (during_s, during_f) != (live_s, live_f) and first in reusable \
                and _streams(anchor, graph):
            in_s, in_f = size[first]
            during_s = live_s - in_s + max(in_s, out_s)
            during_f = live_f - in_f + max(in_f, out_f)
        points.append((during_s, during_f))
        raw.append((during_s, during_f, tuple(seq[p].index for p in chain)))
        if during_s > best_s:
            best_s, best_op = during_s, anchor.index
        best_f = max(best_f, during_f)
        for t in dying:
            s, f = size.get(t, zero)
            live_s -= s
            live_f -= f
        if last.get(out, c) > c:
            live_s += out_s
            live_f += out_f
    return _prune(points), best_s, best_f, best_op, tuple(raw)


def _op_sets(graph: Graph, target: Target, rng: np.random.Generator, n: int) -> set[tuple[int, ...]]:
    """Op sets of decoded schedules (groups as the search makes them) and random runs."""
    space = build_space(graph, target)
    sets = {g.ops for v in space.sample_vectors(rng, n) for g in space.decode(v).groups}
    npu = [op.index for op in graph.ops if op.on_npu]
    for _ in range(n):
        a = int(rng.integers(len(npu)))
        sets.add(tuple(npu[a:a + int(rng.integers(1, 12))]))
    sets.update((i,) for i in npu[:20])  # one-op groups
    return sets


@pytest.mark.parametrize("key", ["tiny_cnn", "bert2", "deepfm", "wide_and_deep", "mobilenet_v2"])
def test_profile_walk_matches_the_reference(key: str) -> None:
    target = Target.default()
    model = zoo_graph(key, 2) if key == "mobilenet_v2" else small_graph(key)
    graph = in_compute_dtype(model, target)
    rng = np.random.default_rng(7)
    tried = 0
    for ops in sorted(_op_sets(model, target, rng, 12)):
        an = _analyse(graph, ops)
        streams = sorted(an.streamable)
        subsets = [frozenset(c) for k in range(min(len(streams), 3) + 1)
                   for c in combinations(streams, k)]
        for streamed in subsets:
            for off in (False, True):
                for held in (False, True):
                    got = footprint._profile(graph, an, streamed, off, held)
                    assert got == _reference(graph, an, streamed, off, held), (ops, streamed, off, held)
                    tried += 1
    assert tried > 200


@pytest.mark.parametrize("key", ["tiny_cnn", "bert2", "wide_and_deep"])
def test_weight_bytes_is_the_footprints(key: str) -> None:
    """``weight_bytes`` (what the capacity facts and the compiled walk read) is
    ``group_footprint(...).weight_bytes`` without the footprint's profiles."""
    model = small_graph(key)
    graph = in_compute_dtype(model, Target.default())
    sets = _op_sets(model, Target.default(), np.random.default_rng(8), 8)
    assert any(footprint.weight_bytes(graph, ops) for ops in sets)
    for ops in sets:
        assert footprint.weight_bytes(graph, ops) == footprint.group_footprint(graph, ops).weight_bytes
        assert footprint.weight_bytes(graph, ops[::-1] + ops[:1]) == footprint.weight_bytes(graph, ops)
