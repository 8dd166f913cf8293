"""A warm start hedged by the roofline and dropped when it ranks badly; the sweep's budget
goes where the best still improves (``autotune.sampling._warm``, ``autotune.whatif._budget``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from autotune.whatif._budget import allot, chunk_size, probe_size, score
from compiler.graph import Graph
from compiler.target import Target

BASE = Target.default()

scores = st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=1, max_size=60)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_hedged_scores_keep_the_top_of_both_orders(data: st.DataObject) -> None:
    """The top 2k of the hedged order hold the top k of each order (the roofline's picks
    are never crowded out by the transferred model's, nor the other way round)."""
    from autotune.sampling._warm import hedged_scores

    a = np.asarray(data.draw(scores))
    b = np.asarray(data.draw(st.lists(st.floats(-1e3, 1e3, allow_nan=False),
                                      min_size=len(a), max_size=len(a))))
    k = data.draw(st.integers(1, max(1, len(a) // 2)))
    h = hedged_scores(a, b)
    top = set(np.argsort(-h, kind="stable")[:2 * k].tolist())
    assert set(np.argsort(-a, kind="stable")[:k].tolist()) <= top
    assert set(np.argsort(-b, kind="stable")[:k].tolist()) <= top


def _rows(graph: Graph, target: Target, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    import cost_model
    from search_space import build_space
    from sim import measure

    space = build_space(graph, target, graph.batch)
    rng = np.random.default_rng(seed)
    pool = [space.sample(rng, uniform=i % 2 == 0) for i in range(n)]
    ok = [(s, m.throughput_per_s) for s, m in zip(pool, measure(graph, pool, target))
          if m.status == "ok"]
    return (np.asarray(cost_model.features(graph, [s for s, _ in ok], target)),
            np.asarray([v for _, v in ok], dtype=np.float64))


def test_a_transferred_model_that_ranks_worse_than_the_roofline_is_dropped(
        tiny_graph: Graph) -> None:
    """Trained on another target's rows with their speeds reversed, the transferred model
    orders this target's rows worse than the roofline: dropped at the first check, and
    from then on the ranker is a cold tune's (same rows, same predictions). Trained on
    the true speeds it ranks at least as well as the roofline here and is kept."""
    from autotune.sampling._ranker import CostModelRanker
    from autotune.sampling._warm import PriorData, WarmRanker, rank_quality

    other, mine = BASE.replace(ddr={"bytes_per_cycle": 13}), BASE.replace(l1={"data_bytes": 65536})
    px, py = _rows(tiny_graph, other, 80, 1)
    x, y = _rows(tiny_graph, mine, 60, 2)
    n = WarmRanker.check_at + 4
    assert n < WarmRanker.own_enough and len(y) > n
    groups = np.zeros(len(py), dtype=np.int64)

    liar = WarmRanker(tiny_graph, mine, seed=0, prior=PriorData(px, 1.0 / py, groups))
    assert liar.hedging
    transferred, roofline = rank_quality(liar._model, x[:n], y[:n])
    assert transferred < roofline
    liar.fit(x[:n], y[:n])
    assert liar.dropped == (transferred, roofline)
    assert not liar.hedging
    cold = CostModelRanker(tiny_graph, mine, seed=0)
    cold.fit(x[:n], y[:n])
    np.testing.assert_allclose(liar.predict(x), cold.predict(x))

    honest = WarmRanker(tiny_graph, mine, seed=0, prior=PriorData(px, py, groups))
    transferred, roofline = rank_quality(honest._model, x[:n], y[:n])
    honest.fit(x[:n], y[:n])
    assert (honest.dropped is None) == (transferred >= roofline)
    if honest.dropped is None:
        assert honest.hedging and "prior=" in honest.label


def test_budget_sizes() -> None:
    assert probe_size(200) == 50 and chunk_size(200) == 50
    assert probe_size(10) == 10 and probe_size(30) == 16 and chunk_size(30) == 8


@settings(max_examples=80, deadline=None)
@given(st.lists(st.one_of(st.none(), st.floats(1.0, 1e4)), min_size=0, max_size=80),
       st.integers(1, 60), st.floats(0.0, 1e4))
def test_a_variant_at_its_floor_whose_best_stopped_falling_scores_zero(
        lat: list[float | None], chunk: int, floor: float) -> None:
    """The score is >= 0; 0 exactly when nothing ran, or the best is at the floor and did not
    fall over its last chunk within the second half of the history (O0 far behind at the
    start does not count as the search's progress); and a best further above the floor
    never scores less."""
    s = score(lat, chunk, floor)
    ok = [i for i, v in enumerate(lat) if v is not None]
    assert s >= 0.0
    if not ok:
        assert s == 0.0
        return
    best = [min([v for v in lat[:i + 1] if v is not None], default=float("inf"))
            for i in range(len(lat))]
    n = len(lat)
    since = max(ok[0], (n - 1) // 2, n - 1 - chunk)  # the window score's backward term reads
    assert (s == 0.0) == (best[since] <= best[-1] and best[-1] <= floor)
    assert score(lat, chunk, floor / 2) >= s


def test_the_recent_window_is_the_last_chunk_when_shorter_than_half() -> None:
    """Fixed numbers: 20 measurements at the floor (100), the best fell from 200 to 100 at
    the 10th. Over the second half (index 9 on) it fell: > 0 with a window of 10 or more;
    over the last 5 (index 14 on) it did not: 0."""
    lat: list[float | None] = [200.0] * 10 + [100.0] * 10
    assert score(lat, 5, 100.0) == 0.0
    assert score(lat, 10, 100.0) > 0.0
    assert score(lat, 60, 100.0) > 0.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.floats(100.0, 1e4), min_size=0, max_size=120), min_size=1, max_size=6),
       st.integers(8, 60))
def test_the_allotment_spends_at_most_the_budget_and_only_on_improving_variants(
        curves: list[list[float]], per: int) -> None:
    """Probes first (nothing handed out until every variant has its probe); the total never
    exceeds ``per`` times the variants; with every variant's probe at its floor, a first chunk goes
    only to one whose best fell over its probe's second half; the replay is a function of
    the histories (the same answer twice)."""
    keys = [f"v{i}" for i in range(len(curves))]
    hist = {k: [float(x) for x in c] for k, c in zip(keys, curves)}
    budget, handed = allot(hist, keys, per)
    assert sum(budget.values()) <= per * len(keys)
    if any(len(c) < probe_size(per) for c in curves):
        assert handed == [] and set(budget.values()) == {probe_size(per)}
    probe = probe_size(per)
    # at its floor where the first chunk is decided: the best of its probe (a record past the
    # probe below it made a variant under its "floor" look still falling: seen on CI-like runs)
    at_floor = {k: min(c[:probe], default=0.0) for k, c in hist.items()}
    _, handed_at_floor = allot(hist, keys, per, at_floor)
    if handed_at_floor:  # every variant at its floor: only one still falling
        c = hist[handed_at_floor[0]]
        assert min(c[:probe]) < min(c[:(probe - 1) // 2 + 1])
    if handed:  # records beyond an allotment count too
        assert sum(max(budget[k], len(hist[k])) for k in keys) <= per * len(keys)
    assert allot(hist, keys, per) == (budget, handed)


def test_the_chunks_go_to_the_variant_that_still_improves() -> None:
    """O0 far behind at the start of the base variant's history does not make it the one
    that improves, nor does a best at its floor: the chunks go to the variant far above it."""
    base = [60000.0, 20000.0, 1600.0] + [1516.0] * 57
    falling = [2000.0 - 10 * i for i in range(60)]
    budget, handed = allot({"a": base, "b": falling}, ["a", "b"], 100, {"a": 1516.0, "b": 1469.0})
    assert handed and set(handed) == {"b"} and budget["a"] == probe_size(100)


def test_an_adaptive_sweep_gives_the_improving_variant_more(tiny_graph: Graph,
                                                            tmp_path: Path) -> None:
    """Two variants, 24 on average: the probes (16 each) first, then chunks of 8 ("more"),
    no more than 48 in all, and a re-run measures nothing (the log holds the allotment)."""
    from autotune._tune import load_tasks
    from autotune.whatif._sweep import _histories, sweep
    from autotune.whatif._targets import make_variants, parse_set

    vs = make_variants(BASE, [parse_set("l1.data_bytes=64K,1M")])
    log = tmp_path / "s.jsonl"
    calls: list[tuple[str, str]] = []
    res = sweep([tiny_graph], vs, trials_per_variant=24, log=log, workers=0, seed=0,
                on_variant=lambda _i, v, what: calls.append((v.name, what)))
    tasks = load_tasks([tiny_graph])
    counts = {v.key: len(c) for v, c in
              ((v, _histories(str(log), tasks, vs).get(v.key, [])) for v in vs)}
    assert all(c >= probe_size(24) for c in counts.values())
    assert sum(counts.values()) <= 48 and res.measured == sum(counts.values())
    whats = [w for _, w in calls]
    assert whats[:2] == ["tuning", "tuning"] and set(whats[2:]) <= {"more", "cross"}
    assert len(whats[2:]) >= sum(c > probe_size(24) for c in counts.values())
    again = sweep([tiny_graph], vs, trials_per_variant=24, log=log, workers=0, seed=0)
    assert again.measured == 0
    assert {r.measurements for r in again.rows} == set(counts.values())


def test_a_model_trained_on_another_simulator_is_said_to_be_stale(tmp_path: Path) -> None:
    """The fingerprint recorded beside a model file is compared with today's simulator's:
    equal, nothing to say; different or missing, one line naming both."""
    import json

    import cost_model
    from autotune.sampling import _simprint
    from autotune.sampling._warm import stale_pretrained

    now = _simprint.simulator_fingerprint()
    assert len(now) == 12 and now == _simprint.simulator_fingerprint()
    model = tmp_path / "xgb-test.ubj"
    model.write_bytes(b"")
    assert cost_model.pretrained_info(model) is None
    missing = stale_pretrained(model)
    assert missing is not None and "unrecorded simulator" in missing and now in missing
    model.with_suffix(".json").write_text(json.dumps({"simulator": now}))
    assert stale_pretrained(model) is None
    model.with_suffix(".json").write_text(json.dumps({"simulator": "0123456789ab"}))
    other = stale_pretrained(model)
    assert other is not None and "0123456789ab" in other and now in other


def test_the_shipped_model_records_its_feature_set_and_simulator() -> None:
    """The shipped model's record names this graphtune's feature set and the simulator it
    learnt from (tools/train_pretrained.py writes both; a model without them is said to be
    stale at every tune)."""
    import cost_model

    path = cost_model.pretrained_path()
    assert path is not None
    info = cost_model.pretrained_info(path)
    assert info is not None and info["feature_set"] == cost_model.feature_set_id()
    assert len(info["simulator"]) == 12 and info["rows"] > 0


def test_a_probe_at_its_floor_gets_no_chunk_whatever_follows_it() -> None:
    """Hypothesis' example: a flat probe at its floor, a lower record after it."""
    per = 25
    curve = [101.0] * probe_size(per) + [100.0]
    _, handed = allot({"v0": curve}, ["v0"], per, {"v0": 101.0})
    assert handed == []
