"""Regroupings (``autotune.whatif._regroup``): a variant's best with groups merged, a group cut
or a boundary moved, measured in a sweep's later chunks beside the grafts; and kicks after a
chunk that left the best as it was (``bench/results/sweep.md``, twentieth pass)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from autotune.whatif._targets import make_variants, parse_set
from compiler.graph import Graph
from compiler.target import Target
from tests.autotune.test_sweep_graft import _resnet50, _starts, recorded, small  # noqa: F401

BASE = Target.default()
DATA = Path(__file__).parent / "data" / "sweep_regroup_r50.jsonl"


def _slot(space: Any, op: int) -> dict[str, int]:
    return {d.kind: f for f, d in enumerate(space.free) if d.at == op and d.kind != "cut"}


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(2, 4))
@example(2, 2)  # a schedule of granularity 0 (one block)
def test_each_regrouping_is_its_move_of_the_base(small: Any, seed: int, span: int) -> None:  # noqa: F811
    """For every regrouping of a sampled schedule: a merge ``(a, b)`` has the base's group
    starts but those strictly inside ``(a, b)`` (2 to ``span`` groups), a cut ``(a, c)`` the
    base's and ``c`` inside the group starting at ``a``, a re-cut ``(a, c)`` the base's with
    the next boundary after ``a`` moved to ``c``; nothing changes outside the new groups'
    parameters and the boundaries; all distinct, none the base, and each decodes."""
    from autotune.sampling._studies import candidate_id
    from autotune.whatif._regroup import regroup_vectors, with_boundaries

    g, space = small
    sampled = space.encode(space.sample(np.random.default_rng(seed)))
    n = len(g.ops)
    out = regroup_vectors(space, sampled, n, span)
    base = with_boundaries(space, sampled)  # granularity 0: the same schedule, cut points kept
    assert candidate_id(space.decode(base)) == candidate_id(space.decode(sampled))
    starts = _starts(space, base)
    bounds = [*starts, n]
    assert out and len({w.tobytes() for _, w in out}) == len(out)
    cut = np.array([f.kind == "cut" for f in space.free])
    at = np.array([f.at for f in space.free])
    for (move, a, c), w in out:
        assert not np.array_equal(w, base) and a in starts
        mine = _starts(space, w)
        i = starts.index(a)
        if move == "merge":
            assert 2 <= bounds.index(c) - i <= span
            assert mine == [s for s in starts if not a < s < c]
            changed_at = {a}
        elif move == "cut":
            assert a < c < bounds[i + 1]
            assert mine == sorted([*starts, c])
            changed_at = {a, c}
        else:
            assert move == "recut" and a < c < bounds[i + 2] and c != bounds[i + 1]
            assert mine == sorted([*(s for s in starts if s != bounds[i + 1]), c])
            changed_at = {a, c}
        moved = ~cut & (w != base)
        assert set(at[moved].tolist()) <= changed_at
        space.decode(w)


def test_a_merge_and_a_cut_vary_the_new_groups_split_and_scope(small: Any) -> None:  # noqa: F811
    """Every split x scope of the merged group (and of a cut's tail) is among the regroupings."""
    from autotune.whatif._regroup import regroup_vectors

    g, space = small
    rng = np.random.default_rng(3)
    for _ in range(50):
        base = space.encode(space.sample(rng))
        if len(_starts(space, base)) >= 3:
            break
    out = regroup_vectors(space, base, len(g.ops))
    starts = _starts(space, base)
    a, c = starts[0], starts[2]
    f = _slot(space, a)
    merged = {(int(w[f["samples"]]), int(w[f["scope"]])) for mv, w in out if mv == ("merge", a, c)}
    assert merged >= {(i, j) for i in range(int(space.n_choices[f["samples"]]))
                      for j in range(int(space.n_choices[f["scope"]]))} - {
        (int(base[f["samples"]]), int(base[f["scope"]]))}


def test_by_class_takes_the_best_of_each_move_first() -> None:
    """One pick per move (its best-scored candidate), the moves by that score; ties keep the
    order given; at most ``count``."""
    from autotune.whatif._regroup import by_class

    moves = [("cut", 0, 3), ("cut", 0, 3), ("merge", 0, 9), ("cut", 0, 5), ("merge", 0, 9)]
    scores = np.array([1.0, 5.0, 4.0, 4.0, 0.5])
    assert by_class(moves, scores, 10) == [1, 2, 3]
    assert by_class(moves, scores, 2) == [1, 2]
    assert by_class([], np.array([]), 3) == []


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 30), st.lists(st.sampled_from([1.0, 2.0, 3.0, 4.0]), max_size=230))
@example(0, [4.0] * 100)  # stalled: 50 without a better best after the probe's 50
@example(0, [4.0] * 99 + [3.0])  # the last record improved it
@example(0, [4.0] * 99)  # no chunk after the probe yet
def test_stalled_is_the_last_chunk_without_a_better_best(nones: int, values: list[float]) -> None:
    """A variant stalled when it had a chunk past its probe and its best after its last chunk
    is no better than before it (a history: None until every task ran, then a running best)."""
    from itertools import accumulate

    from autotune.whatif._budget import chunk_size, probe_size
    from autotune.whatif._regroup import stalled

    c = chunk_size(200)
    history: list[float | None] = [None] * nones + list(accumulate(values, min))
    expect = (len(history) >= probe_size(200) + c and history[-1] is not None
              and history[-c - 1] is not None and history[-1] == history[-c - 1])
    assert stalled(history, 200) == expect


def test_the_stuck_best_of_the_seed_2_sweep_has_a_faster_regrouping(r50_16: Graph) -> None:
    """The seed-2 sweep's best of ResNet-50 b16 at L1 1M / DDR 27 (6,975.1 µs; 146 measurements
    of its own search did not leave it, nineteenth pass): moving its boundary at op 129 to 140
    (ops 89-139 one group, as the cold best has them) with the head's split and scope varied
    gives 6,968.1 µs (offline, h114), and the cut of its group 89-128 at 99 gives 6,947.1; from
    the re-cut, group 0's scope in DDR with lookahead 1 is within 1 % of the cold best."""
    from autotune.whatif._regroup import regroup_vectors

    _, _, space, base, lat = recorded(r50_16, DATA, 16, "l1.data_bytes=1M",
                                      "ddr.bytes_per_cycle=27")
    assert _starts(space, base) == [0, 47, 89, 129, 151]
    assert lat(base) == pytest.approx(6975.13, abs=0.01)
    out = regroup_vectors(space, base, len(r50_16.ops))
    recut = [w for mv, w in out if mv == ("recut", 89, 140)]
    assert recut and min(lat(w) for w in recut) == pytest.approx(6968.1, abs=0.05)
    cut = [w for mv, w in out if mv == ("cut", 89, 99)]
    assert min(lat(w) for w in cut) == pytest.approx(6947.1, abs=0.05)
    # then group 0's scope and the lookahead: within 1 % of the cold best (6,771.9), two steps
    names = [d.name for d in space.free]
    s0, la = names.index("scope@0"), names.index("lookahead")
    w = min(recut, key=lat).copy()
    w[s0], w[la] = space.free[s0].choices.index("DDR"), 1
    assert lat(w) <= 6771.9 / 0.99


@pytest.fixture(scope="module")
def r50_16() -> Graph:
    return _resnet50(16)


def test_graft_seeds_adds_its_regroupings_after_the_grafts(small: Any, tmp_path: Path) -> None:  # noqa: F811
    """``graft_seeds(regroup=k)`` returns what ``regroup=0`` returns, then at most ``k``
    regroupings of the base (none measured, none a graft picked, each fitting), one per
    move; without donors, the regroupings alone."""
    import autotune.whatif._sweep as sweep_module
    from autotune._tune import load_tasks
    from autotune.whatif._graft import graft_seeds
    from autotune.whatif._regroup import regroup_vectors
    from compiler.capacity import check_capacity, in_compute_dtype
    from compiler.schedule import GraphSchedule
    from search_space import build_space

    graph = small[0]
    vs = make_variants(BASE, [parse_set("l1.data_bytes=384K,1M")])
    log = tmp_path / "s.jsonl"
    sweep_module.sweep([graph], vs, trials_per_variant=24, log=log, workers=0, seed=0,
                       pretrained=False, graft=0, regroup=0, kick=0)
    (task,) = load_tasks([graph])
    recs = list(sweep_module._sim_records(str(log), [task], vs))
    v = vs[0]
    t = v.target
    space = build_space(task.graph, t, task.batch)
    own = [r for r in recs if str(r.target) == v.key]
    donors = [r for r in recs if str(r.target) != v.key]
    plain = graft_seeds(space, graph, t, own, donors, count=3, seed=0)
    more = graft_seeds(space, graph, t, own, donors, count=3, seed=0, regroup=4)
    ids = [space.encode(s).tobytes() for s in more]
    assert ids[:len(plain)] == [space.encode(s).tobytes() for s in plain]
    extra = more[len(plain):]
    assert 1 <= len(extra) <= 4 and len(set(ids)) == len(ids)
    ran = [r for r in own if r.result.status.value == "ok" and r.result.latency_us]
    best = min(ran, key=lambda r: float(r.result.latency_us or 0.0))
    base = space.project_nearest(GraphSchedule.from_json(dict(best.schedule))).vector
    moves = {space.encode(space.decode(w)).tobytes(): mv
             for mv, w in regroup_vectors(space, base, len(graph.ops))}
    measured = {space.encode(GraphSchedule.from_json(dict(r.schedule))).tobytes() for r in own}
    gc = in_compute_dtype(graph, t)
    picked_moves = [moves[space.encode(s).tobytes()] for s in extra]
    assert len(set(picked_moves)) == len(picked_moves)
    for s in extra:
        assert space.encode(s).tobytes() not in measured and check_capacity(gc, s, t) is None
    alone = graft_seeds(space, graph, t, own, [], count=3, seed=0, regroup=2)
    assert 1 <= len(alone) <= 2 and all(space.encode(s).tobytes() in moves for s in alone)


def test_a_sweep_kicks_a_stalled_variants_next_chunk_and_asks_for_regroupings(
        small: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """``sweep(kick=k)`` gives a later chunk ``polish_kick=k`` exactly when the variant is
    ``stalled`` before it (here: every other time it asks; ``kick=0``: never), and asks
    ``graft_seeds`` for ``regroup`` regroupings."""
    import autotune._tune as tune_module
    import autotune.whatif._budget as budget_module
    import autotune.whatif._sweep as sweep_module

    seen: list[tuple[bool, int]] = []
    asked: list[int] = []
    real_tune, real_stalled, real_gs = tune_module.tune, budget_module.stalled, sweep_module.graft_seeds
    state: dict[str, Any] = {"stalled": False}

    def spy_stalled(history: Any, tpv: int, tol: float = 0.0) -> bool:  # every other asked: stalled
        real_stalled(history, tpv, tol)
        state["n"] = state.get("n", 0) + 1
        state["stalled"] = state["n"] % 2 == 1
        return state["stalled"]

    def spy_tune(*args: Any, **kwargs: Any) -> Any:
        if kwargs["search"].guided is not None:
            seen.append((state["stalled"], kwargs["search"].guided.polish_kick))
        state["stalled"] = False
        return real_tune(*args, **kwargs)

    def spy_gs(*args: Any, **kwargs: Any) -> Any:
        asked.append(args[8] if len(args) > 8 else kwargs.get("regroup", 0))
        return real_gs(*args, **kwargs)

    monkeypatch.setattr(budget_module, "stalled", spy_stalled)  # as later_options asks it
    monkeypatch.setattr(tune_module, "tune", spy_tune)
    monkeypatch.setattr(sweep_module, "graft_seeds", spy_gs)
    vs = make_variants(BASE, [parse_set("l1.data_bytes=384K,1M")])
    for kick in (3, 0):
        seen.clear()
        asked.clear()
        state["n"] = 0  # the first asked: stalled
        sweep_module.sweep([small[0]], vs, trials_per_variant=24, log=tmp_path / f"k{kick}.jsonl",
                           workers=0, seed=0, pretrained=False, kick=kick, regroup=2,
                           lend=False)  # lend_to asks the patched stalled too
        assert seen and asked and set(asked) == {2}
        assert all(k == (kick if was else 0) for was, k in seen)
        assert any(was for was, _ in seen) == bool(kick)  # stalled is asked only with kicks
