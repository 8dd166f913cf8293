"""The polish's second ring (``autotune.sampling._deep``): a new group boundary with a shape
of its own, polished after the one-move neighbourhood, booked under its own limit."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from autotune import RunOptions, SearchOptions, tune
from autotune.sampling._breed import RankerScorer, breed
from autotune.sampling._deep import RESHAPED, split_reshape
from autotune.sampling._guided import GuidedSampler
from autotune.sampling._polish import DEEP, PolishState, deep_key, is_deep, ring_of
from autotune.sampling._ranker import CostModelRanker
from autotune.sampling._studies import candidate_id
from compiler.graph import Graph
from compiler.schedule import GraphSchedule
from compiler.target import Target
from search_space import build_space
from search_space._dims import CUT_BELOW, GRANULARITIES
from search_space._neighbours import neighbour_vectors
from tests.autotune.test_polish import POLISH, _log_marks, _request
from tests.autotune.test_tune import _lines, _without_time


def test_the_ring_is_one_new_boundary_with_every_shape_of_the_new_group(
        tiny_graph: Graph, tune_target: Target) -> None:
    """Each vector of the ring is its parent with one cut point more made a boundary (the
    new group's parameters inherited, as ``split_group`` does) and the new group's samples,
    cpp and parts set: every combination once per cut point, the plain split among them."""
    space = build_space(tiny_graph, tune_target, tiny_graph.batch)
    rng = np.random.default_rng(11)
    seen_rings = 0
    cuts = sorted({int(space.rep[d]) for d in space.d_cut})

    def bounds(v: np.ndarray) -> int:
        below = CUT_BELOW[GRANULARITIES[int(v[space.rep[space.d_gran]])]]
        return sum(int(v[f]) < below for f in cuts)

    for _ in range(8):
        parent = space.sample(rng)
        vec = space.encode(parent)
        ring = split_reshape(space, parent)
        if not len(ring):
            continue
        seen_rings += 1
        assert len(ring) == len(ring.bases) * int(np.prod(ring.radix))
        assert ring.radix == tuple(int(space.n_choices[d]) for d in ring.dims[0])
        one = {v.tobytes() for m, v in neighbour_vectors(space, parent) if m == "split_group"}
        vectors = [ring[i] for i in range(len(ring))]
        assert len({v.tobytes() for v in vectors}) == len(vectors)  # no repeats
        for b, dims in enumerate(ring.dims):
            assert {space.free[d].kind for d in dims} == set(RESHAPED)
            per = vectors[b * ring.per:(b + 1) * ring.per]
            shapes = {tuple(int(v[d]) for d in dims) for v in per}
            assert len(shapes) == ring.per  # every combination
            assert all(bounds(v) == bounds(vec) + 1 for v in per)  # one boundary more
            # the inherited shape is the one-move split_group child itself
            assert any(v.tobytes() in one for v in per)
        assert ring[-1].tobytes() == vectors[-1].tobytes()
    assert seen_rings >= 4


def test_the_second_ring_comes_after_the_first_with_its_own_limit() -> None:
    st = PolishState(after=2, limit=3, window=10, deep=4)
    st.measured("b", 1.0)
    st.measured("x", 0.5)
    st.measured("y", 0.5)
    assert st.due() == ("b", "polish")
    st.start("b")
    st.back("b", 3, size=50, window=10)  # the first ring's limit
    assert st.due() == (deep_key("b"), "deep")
    assert st.start(deep_key("b"), "deep") == 10 and st.due() == ("", "")
    st.back(deep_key("b"), 2, size=900, window=10)
    assert st.due() == (deep_key("b"), "deep") and st.start(deep_key("b"), "deep") == 20
    st.measured("c", 2.0, polish_of=deep_key("b"))  # the second ring found a better one
    st.back(deep_key("b"), 2, size=900, window=20)  # (4: b's second ring is done too)
    assert deep_key("b") in st.done and st.due() == (deep_key("c"), "deep")  # c's 2nd first
    st.start(deep_key("c"), "deep")
    st.back(deep_key("c"), 0, size=5, window=10)  # c's second ring is exhausted
    assert st.due() == ("c", "polish")
    st.start("c")
    st.measured("d", 3.0, polish_of="c")  # the first ring found one: its first ring first
    st.back("c", 1, size=50, window=10)
    assert st.due() == ("d", "polish")
    assert PolishState(after=2, limit=3, window=10).due() == ("", "")
    off = PolishState(after=0, limit=1, window=10)  # deep=0: no second ring
    off.measured("b", 1.0)
    off.start("b")
    off.back("b", 1, size=5, window=10)
    assert off.due() == ("", "")
    # a resumed tune counts its predecessor's second-ring proposals against ``deep``
    resumed = PolishState(after=0, limit=1, window=10, deep=2)
    resumed.measured("b", 1.0)
    resumed.done.add("b")
    for c in "pq":
        resumed.measured(c, 0.5, polish_of=deep_key("b"), inherited=True)
    assert deep_key("b") in resumed.done and resumed.due() == ("", "")
    assert ring_of(deep_key("b")) == "b" == ring_of("b") and not is_deep("b")


def test_a_second_ring_round_ranks_its_ring_and_is_booked_as_a_polish(
        tiny_graph: Graph, tune_target: Target) -> None:
    """A request with ``kick=DEEP`` ranks the parent's ring (every pick decodes from a ring
    vector); the sampler asks for it once the first ring is done, marks its proposals with
    the ring's key and books the round back under it (not as a kick)."""
    space = build_space(tiny_graph, tune_target, tiny_graph.batch)
    rng = np.random.default_rng(3)
    ranker = CostModelRanker(tiny_graph, tune_target, seed=0)
    for _ in range(20):
        parent = space.sample(rng)
        if len(split_reshape(space, parent)) >= 32:
            break
    vec, pid = space.encode(parent), candidate_id(parent)
    ring = {candidate_id(space.decode(v)) for v in split_reshape(space, parent)} - {pid}
    got = breed(space, RankerScorer(ranker), replace(_request(vec, deep_key(pid), 1 << 20),
                                                     kick=DEEP))
    assert got.picks and {p.cid for p in got.picks} <= ring
    assert got.polish_of == deep_key(pid) and got.neighbourhood == len(split_reshape(space, parent))

    sampler = GuidedSampler(space=space, ranker=ranker, seed=3,
                            options=replace(POLISH, polish_after=0, polish_deep=5))
    sampler._vectors[pid] = vec
    sampler.polish.measured(pid, 1.0)
    sampler.polish.done.add(pid)
    req = sampler.breed_request()
    assert (req.polish_of, req.kick, req.climb) == (deep_key(pid), DEEP, False)
    assert req.parents[0].tobytes() == vec.tobytes()
    n = sampler.bred(breed(space, RankerScorer(ranker), req))
    assert n > 0 and all(p.polish_of == deep_key(pid) for p in sampler._queue)
    assert sampler.polish.out == "" and sampler.polish.kicked_out == set()


def test_second_ring_tunes_are_reproducible_and_resume_within_its_limit(
        tiny_graph: Graph, tmp_path: Path) -> None:
    """In-process with one seed, two tunes with the second ring write the same log and
    measure some of its proposals (marked ``deep:<cid>`` in the log); a tune resumed from
    its log alone measures nothing twice and no ring beyond its ``polish_deep``."""
    opts = replace(POLISH, polish_limit=4, polish_deep=3)

    def run(log: Path, trials: int) -> None:
        tune([tiny_graph], trials=trials, log=log, search=SearchOptions(seed=5, guided=opts),
             run=RunOptions(workers=0, curve=False))

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    run(a, 56)
    run(b, 56)
    assert _without_time(a) == _without_time(b)
    marks = _log_marks(a)
    deep = {n: m for n, m in marks.items() if is_deep(m)}
    assert deep  # the second ring was measured
    assert all(list(deep.values()).count(m) <= opts.polish_deep for m in deep.values())
    first = min(deep)
    r = tmp_path / "r.jsonl"
    run(r, first + 2)
    (tmp_path / "r.journal").unlink()  # the log alone
    run(r, 56)
    cids = [candidate_id(GraphSchedule.from_json(x["schedule"])) for x in _lines(r)]
    assert len(cids) == 56 == len(set(cids))
    got = list(_log_marks(r).values())
    assert all(got.count(m) <= opts.polish_deep for m in got if is_deep(m))


def test_a_carried_move_moves_one_boundary_with_its_groups_parameters(
        tiny_graph: Graph, tune_target: Target) -> None:
    """Each carried move keeps the number of boundaries, moves one of them to a cut point
    between its neighbours, and gives the moved group the parameters its old start had;
    the second ring's hood lists them first, in their order."""
    from autotune.sampling._deep import carried_moves
    from autotune.sampling._polish import _hood

    space = build_space(tiny_graph, tune_target, tiny_graph.batch)
    rng = np.random.default_rng(5)
    cuts = [int(space.rep[d]) for d in space.d_cut]
    segs = space.structure.segments

    def on(v: np.ndarray) -> list[int]:
        below = CUT_BELOW[GRANULARITIES[int(v[space.rep[space.d_gran]])]]
        return [k for k, f in enumerate(cuts) if int(v[f]) < below]

    def params(v: np.ndarray, k: int) -> list[int]:
        start = segs[k + 1][0]
        return [int(v[space.rep[d]]) for d in space._seg_dims[start]] + [
            int(v[space.rep[space.d_scope[start]]])]

    total = 0
    for _ in range(10):
        parent = space.sample(rng)
        vec = space.encode(parent)
        moved = carried_moves(space, parent)
        total += len(moved)
        for v in moved:
            a, b = on(vec), on(v)
            assert len(a) == len(b)
            (old,), (new,) = set(a) - set(b), set(b) - set(a)
            j = a.index(old)
            assert (a[j - 1] if j else -1) < new < (a[j + 1] if j + 1 < len(a) else len(cuts))
            assert params(v, new) == [min(x, int(space.n_choices[f]) - 1) for x, f in zip(
                params(vec, old), [int(space.rep[d]) for d in space._seg_dims[segs[new + 1][0]]]
                + [int(space.rep[space.d_scope[segs[new + 1][0]]])])]
        if moved:
            hood = _hood(space, vec, parent, DEEP)
            assert [hood.vectors[i].tobytes() for i in range(len(moved))] == [
                v.tobytes() for v in moved]
            assert len(hood.vectors) == len(moved) + len(split_reshape(space, parent))
    assert total > 0
