"""Scope climbs (``autotune.whatif._climb``): a sweep's later chunk climbs its new bests by their
scope moves, each measured, when ``CLIMB`` > 0 (``bench/results/sweep.md``, twenty-sixth pass)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.graph import Graph
from tests.autotune.test_sweep_graft import _resnet50, recorded, small  # noqa: F401

DATA = Path(__file__).parent / "data" / "sweep_pair_r50.jsonl"
BAR = 9341.43 / 0.99  # the miss's bar: 0.99 of its cold best's speed


@settings(max_examples=8, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_scope_moves_are_distinct_candidates_the_region_first(small: Any, seed: int) -> None:  # noqa: F811
    """Each of :func:`scope_moves` differs from ``x`` in one ``scope``/``xscope`` parameter, does
    what neither ``x`` nor another move does (``candidate_id``), is none of ``seen``; the moves
    at ops where ``x`` differs from ``old`` come first, each part in the score's order."""
    from autotune.sampling._studies import candidate_id
    from autotune.whatif._climb import scope_moves

    _, space = small
    rng = np.random.default_rng(seed)
    x = space.encode(space.sample(rng))
    old = x.copy()  # x with one op's scope changed: the region is that op
    f = int(rng.choice([f for f, d in enumerate(space.free) if d.kind == "scope" and space.n_choices[f] > 1]))
    old[f] = (x[f] + 1) % space.n_choices[f]
    at = np.array([f.at for f in space.free])
    diff = at[np.nonzero(x != old)[0]]
    lo, hi = (int(diff.min()), int(diff.max())) if len(diff) else (-1, -1)

    def score(ws: list[np.ndarray]) -> np.ndarray:
        return np.array([float(w.sum() % 7) for w in ws])

    moves = scope_moves(space, x, old, score)
    ids = [candidate_id(space.decode(w)) for w in moves]
    assert len(set(ids)) == len(ids) and candidate_id(space.decode(x)) not in ids
    near = []
    for w in moves:
        (f,) = np.nonzero(w != x)[0]
        assert space.free[int(f)].kind in ("scope", "xscope")
        near.append(lo <= int(at[f]) <= hi)
    assert near == sorted(near, reverse=True)  # the region (the op's scope moves) first
    s = score(moves)
    for part in (True, False):
        mine = [float(v) for v, n in zip(s, near, strict=True) if n is part]
        assert mine == sorted(mine, reverse=True)
    assert not scope_moves(space, x, old, score, seen=set(ids))


@pytest.fixture(scope="module")
def r50_16() -> Graph:
    return _resnet50(16)


def test_the_climb_takes_the_misss_pair_under_its_bar(r50_16: Graph) -> None:
    """From the miss's pair (9,456.0 µs: ResNet-50 b16 seed 0, L1 384K / DDR 27), the climb by
    scope moves passes the bar (9,435.8) within 40 measurements when the model ranks them as
    the simulator does; it measures each candidate once, in blocks of at most ``BLOCK``, never
    past its budget, and returns the fastest it measured."""
    from autotune.sampling._studies import candidate_id
    from autotune.whatif._climb import BLOCK, scope_climb
    from autotune.whatif._regroup import pair_vectors

    _, _, space, base, lat = recorded(r50_16, DATA, 16, "l1.data_bytes=384K",
                                      "ddr.bytes_per_cycle=27")
    pair = min((w for mv, w in pair_vectors(space, base, len(r50_16.ops)) if mv == ("pair", 152, 158)),
               key=lat)
    assert lat(pair) == pytest.approx(9455.99, abs=0.05)
    measured: list[str] = []
    got: list[float] = []

    def measure(ws: list[np.ndarray]) -> list[float]:
        assert 1 <= len(ws) <= BLOCK
        measured.extend(candidate_id(space.decode(w)) for w in ws)
        got.extend(lat(w) for w in ws)
        return [lat(w) for w in ws]

    def oracle(ws: list[np.ndarray]) -> np.ndarray:
        return -np.array([lat(w) for w in ws])

    x, y, spent = scope_climb(space, [(pair, lat(pair))], base, oracle, measure, 40)
    assert y <= BAR and x is not None and lat(x) == y == min(got)
    assert spent == len(measured) <= 40 and len(set(measured)) == len(measured)
    for budget in (0, 3):  # never past the budget
        measured.clear()
        x, y, spent = scope_climb(space, [(pair, lat(pair))], base, oracle, measure, budget)
        assert spent == len(measured) <= budget
        assert y == min([lat(pair), *got[-spent:]] if spent else [lat(pair)])


class _Rec:
    """A record as ``climbed_chunk`` reads it (its schedule is never decoded in these stubs)."""

    def __init__(self, lat: float) -> None:
        self.lat = lat


def test_climbed_chunk_climbs_after_a_chunk_that_found_a_new_best(monkeypatch: pytest.MonkeyPatch) -> None:
    """The chunk is one tune to its total, as before; then, with ``CLIMB`` (or ``budget``) > 0,
    room left in the sweep's total and one task, a climb from the chunk's new bests (against the
    best before it), within the budget and the room; none when the chunk found none."""
    import autotune.whatif._climb as climb

    assert climb.CLIMB == 0
    log: list[Any] = []
    recs: list[_Rec] = []
    chunk = [_Rec(95.0), _Rec(85.0), _Rec(88.0), _Rec(80.0)]

    def run(variant: Any, trials: int, others: Any, extra: Any, loud: Any, seeds: Any) -> None:
        assert loud is None and variant == "v" and others == ["o"]
        log.append((trials, seeds))
        recs.extend(chunk)

    climbs: list[Any] = []
    monkeypatch.setattr(climb, "_ok", lambda _p, _t, _v: [(r, r.lat) for r in recs])
    monkeypatch.setattr(climb, "_climb", lambda space, run_to, p, task, v, before, after, starts, seed, b:
                        climbs.append(([lat for _, lat in starts], b)))

    class Task:
        graph, batch = None, 16

    class Variant:
        target = None

    import search_space

    monkeypatch.setattr(search_space, "build_space", lambda *a: "space")

    def chunk_of(budget: int | None, tasks: int = 1, room: int = 100, old: float = 90.0) -> list[Any]:
        log.clear()
        climbs.clear()
        recs[:] = [_Rec(100.0), _Rec(old)]
        climb.climbed_chunk(lambda _v, *a: run("v", *a), Variant(), ["o"], [], "log",  # type: ignore[arg-type]
                            [Task()] * tasks, 50, room, budget=budget)
        return log

    assert chunk_of(None) == [(50, None)] and climbs == []  # CLIMB 0
    assert chunk_of(4, tasks=2) == [(50, None)] and climbs == []  # two tasks
    assert chunk_of(4, room=0) == [(50, None)] and climbs == []  # the sweep's total is spent
    assert chunk_of(40) == [(50, None)] and climbs == [([85.0, 80.0], 40)]
    assert chunk_of(40, room=7) == [(50, None)] and climbs == [([85.0, 80.0], 7)]
    assert chunk_of(40, old=70.0) == [(50, None)] and climbs == []  # nothing beat the old best
    assert climb.room({"a": [0] * 60, "b": [0] * 10}, {"a": 50, "b": 50}, 100, 30) == 200 - 30 - 110


def test_bench_climb_sets_the_module_constant_the_sweep_reads(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """``bench/sweep.py --climb N`` sets ``autotune.whatif._climb.CLIMB`` for the runs and writes
    it to ``results.json``; without it the sweep's own (0 here)."""
    import json

    import autotune.whatif._climb as climb
    import bench.sweep as bench_sweep

    seen: list[int] = []

    def stub(*_args: object, **_kwargs: object) -> dict[str, object]:
        seen.append(climb.CLIMB)
        return {"model": "m", "batch": 1, "options": {}, "cold_trials": 1, "sweep_trials": 1,
                "total_measurements": {}, "seconds": {}, "rows": []}

    monkeypatch.setattr(bench_sweep, "run_model", stub)
    monkeypatch.setattr(climb, "CLIMB", 0)
    for argv, want in ((["--climb", "40"], 40), (["--climb", "0"], 0)):
        assert bench_sweep.main(["--models", "m", "--runs", "sweep", "-o", str(tmp_path), *argv]) == 0
        assert seen[-1] == want
        assert json.loads((tmp_path / "results.json").read_text())["climb"] == want
