"""A sweep's warm start takes from the nearest finished variants (``autotune.whatif._nearest``)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autotune.whatif._nearest import distance, is_rate, prior_rows, ranked, same_capacities, seed_sources
from autotune.whatif._targets import Variant, make_variants, parse_set, settable_keys
from compiler.graph import Graph
from compiler.target import Target

BASE = Target.default()
L1 = [f"{k}K" for k in (64, 128, 256, 384, 512, 768, 1024, 2048)]
DDR = ["7", "13", "27", "54"]


def _variants(l1: list[str], ddr: list[str]) -> list[Variant]:
    return make_variants(BASE, [parse_set("l1.data_bytes=" + ",".join(l1)),
                                parse_set("ddr.bytes_per_cycle=" + ",".join(ddr))])


ALL = _variants(L1, DDR)
pick = st.sampled_from(ALL)


def test_distance_counts_factors_of_two() -> None:
    v = {x.name: x for x in _variants(["256K", "512K", "1M"], ["13", "27"])}
    a = v["STCP920+l1.data_bytes=256K,ddr.bytes_per_cycle=13"]
    b = v["STCP920+l1.data_bytes=1M,ddr.bytes_per_cycle=13"]
    c = v["STCP920+l1.data_bytes=512K,ddr.bytes_per_cycle=27"]
    assert distance(a, b) == 2.0  # L1 x4
    assert math.isclose(distance(a, c), 1.0 + math.log2(27 / 13))  # L1 x2, DDR x27/13


@settings(max_examples=60, deadline=None)
@given(pick, pick, pick)
def test_distance_is_a_metric(a: Variant, b: Variant, c: Variant) -> None:
    """Invariant: zero only for the same values, symmetric, and the triangle inequality."""
    assert distance(a, a) == 0.0
    assert (distance(a, b) == 0.0) == (a.values == b.values)
    assert math.isclose(distance(a, b), distance(b, a))
    assert distance(a, c) <= distance(a, b) + distance(b, c) + 1e-9


@settings(max_examples=60, deadline=None)
@given(pick, st.lists(pick, min_size=1, max_size=6, unique_by=lambda v: v.name))
def test_seeds_come_from_the_nearest_and_rows_shrink_with_distance(v: Variant,
                                                                    done: list[Variant]) -> None:
    """Invariant: seed sources are exactly the finished variants at the least distance and,
    among those with the same capacities, the ones at the least distance; a farther
    variant never gives more prior rows than a nearer one, the nearest give all."""
    by = ranked(v, done)
    near = by[0][0]
    alike = [d for d, f in by if same_capacities(v, f)]
    want = {f.name for d, f in by if d <= near + 1e-9
            or (same_capacities(v, f) and d <= min(alike) + 1e-9)}
    assert {f.name for f in seed_sources(v, done)} == want
    assert len(seed_sources(v, done)) == len(want)  # each once
    rows = prior_rows(v, done, 400)
    for d, f in by:
        if d <= near + 1e-9:
            assert rows[f.key] == 400
    for d1, f1 in by:
        for d2, f2 in by:
            if d1 < d2:
                assert rows.get(f1.key, 0) >= rows.get(f2.key, 0)
    assert seed_sources(v, []) == [] and prior_rows(v, [], 400) == {}


def test_a_variant_is_also_seeded_by_the_nearest_that_differs_in_rates_only() -> None:
    """ResNet-50 b16's L1 384K / DDR 13 (bench/results/sweep.md, h70): its nearest finished
    variant is 512K / DDR 13, whose best schedules overflow a 384K L1; 384K / DDR 27 (farther)
    has the same capacities, so its schedules all fit, and it is a seed source too."""
    v = {x.name: x for x in _variants(["384K", "512K", "1M"], ["13", "27"])}
    name = "STCP920+l1.data_bytes={},ddr.bytes_per_cycle={}".format
    me, below, alike = v[name("384K", "13")], v[name("512K", "13")], v[name("384K", "27")]
    assert distance(me, below) < distance(me, alike)
    assert same_capacities(me, alike) and not same_capacities(me, below)
    assert [f.name for f in seed_sources(me, [below, alike])] == [below.name, alike.name]
    far = v[name("1M", "27")]
    assert [f.name for f in seed_sources(me, [below, far])] == [below.name]
    assert [f.name for f in seed_sources(me, [alike])] == [alike.name]


def test_the_warm_start_takes_the_rate_only_variants_best(tiny_graph: Graph,
                                                         tmp_path: Path) -> None:
    """16K / DDR 13 after 32K / DDR 13 (nearer) and 16K / DDR 27: the warm schedules are both
    variants' best made to fit 16K / DDR 13 (``autotune.whatif._repair``); the 16K / DDR 27
    ones that the space expresses exactly are seeds as they are (they all fit)."""
    from autotune._tune import load_tasks
    from autotune.sampling._studies import candidate_id
    from autotune.sampling._warm import warm_schedules
    from autotune.whatif._repair import fit_schedule
    from autotune.whatif._sweep import _records, _warm_from, sweep
    from compiler.capacity import check_capacity, in_compute_dtype
    from search_space import build_space

    vs = {x.name: x for x in _variants(["16K", "32K"], ["13", "27"])}
    name = "STCP920+l1.data_bytes={},ddr.bytes_per_cycle={}".format
    me, near, alike = vs[name("16K", "13")], vs[name("32K", "13")], vs[name("16K", "27")]
    log = tmp_path / "sweep.jsonl"
    sweep([tiny_graph], [near, alike], trials_per_variant=10, log=log, workers=0, seed=2,
          pretrained=False)
    tasks = load_tasks([tiny_graph])
    key = tasks[0].key
    recs = _records(str(log), tasks, [near, alike])
    space = build_space(tiny_graph, me.target, tiny_graph.batch)
    best = {v.name: warm_schedules(recs[v.key][key]) for v in (near, alike)}
    fitted = {v: {candidate_id(f) for s in best[v]
                  if (f := fit_schedule(space, tiny_graph, s, me.target)) is not None} for v in best}
    assert fitted[alike.name] - fitted[near.name]
    seeds, _ = _warm_from(str(log), tasks, me, [near, alike], False)
    got = {candidate_id(s) for s in seeds[key]}
    assert got == fitted[near.name] | fitted[alike.name]
    exact = {candidate_id(s) for s in best[alike.name] if space.project(s).schedule is not None}
    assert exact and exact <= got
    g = in_compute_dtype(tiny_graph, me.target)
    assert all(check_capacity(g, s, me.target) is None for s in seeds[key])


RATE_KEYS = sorted(k for k, kind in settable_keys().items() if is_rate(k) and kind == "float")


def test_the_rate_keys_are_the_rates_and_latencies() -> None:
    """Every rate or latency the target files can set, and no capacity."""
    assert "ddr.bytes_per_cycle" in RATE_KEYS and "dma.setup_cycles" in RATE_KEYS
    assert {"clock_hz", "matrix.macs_per_cycle", "host.launch_overhead_us"} <= set(
        k for k in settable_keys() if is_rate(k))
    for k in ("l1.data_bytes", "l1.weight_bytes", "llb.bytes", "ddr.bytes", "chip.clusters",
              "chip.cores_per_cluster", "compute_dtype", "llb.broadcast", "ddr.burst_bytes"):
        assert not is_rate(k), k


@settings(max_examples=25, deadline=None)
@given(key=st.sampled_from(RATE_KEYS), factor=st.sampled_from([0.25, 0.5, 2.0, 4.0]),
       l1=st.sampled_from([16 * 1024, 64 * 1024, 1024 * 1024]), seed=st.integers(0, 2**16))
def test_a_rate_never_changes_what_fits(tiny_graph: Graph, key: str, factor: float, l1: int,
                                        seed: int) -> None:
    """Invariant behind :func:`same_capacities`: scaling any rate or latency of the target
    changes no schedule's capacity verdict (checked on the real capacity check, on schedules
    sampled from the space; at 16K most overflow, at 1M most fit)."""
    import numpy as np

    from compiler.capacity import check_capacity, in_compute_dtype
    from search_space import build_space

    section, _, field = key.rpartition(".")
    a = BASE.replace(l1={"data_bytes": l1})
    old = getattr(getattr(a, section), field) if section else getattr(a, field)
    b = a.replace(**({section: {field: old * factor}} if section else {field: old * factor}))
    from autotune.sampling._studies import candidate_id

    space, other = build_space(tiny_graph, a, tiny_graph.batch), build_space(tiny_graph, b, tiny_graph.batch)
    ra, rb = np.random.default_rng(seed), np.random.default_rng(seed)
    ga, gb = in_compute_dtype(tiny_graph, a), in_compute_dtype(tiny_graph, b)
    for i in range(8):
        s = space.sample(ra, uniform=i % 2 == 0)
        assert candidate_id(other.sample(rb, uniform=i % 2 == 0)) == candidate_id(s)  # one space
        ca, cb = check_capacity(ga, s, a), check_capacity(gb, s, b)
        assert (ca is None) == (cb is None)
        if ca is not None and cb is not None:
            assert (ca.needed_bytes, ca.capacity_bytes) == (cb.needed_bytes, cb.capacity_bytes)


def test_a_variant_is_seeded_by_its_nearest_finished_variant(tiny_graph: Graph,
                                                             tmp_path: Path) -> None:
    """32K after 1M and 16K: the warm schedules are 16K's best (made to fit 32K), none of
    1M's; 1M gives the cost model 1/16 of the rows 16K gives (four factors of two farther)."""
    from autotune._tune import load_tasks
    from autotune.sampling._studies import candidate_id
    from autotune.sampling._warm import warm_schedules
    from autotune.whatif._repair import fit_schedule
    from autotune.whatif._sweep import _records, _warm_from, sweep
    from search_space import build_space

    vs = make_variants(BASE, [parse_set("l1.data_bytes=1M,16K,32K")])
    log = tmp_path / "sweep.jsonl"
    sweep([tiny_graph], vs[:2], trials_per_variant=10, log=log, workers=0, seed=2, pretrained=False)
    tasks = load_tasks([tiny_graph])
    key = tasks[0].key
    recs = _records(str(log), tasks, vs[:2])
    space = build_space(tiny_graph, vs[2].target, tiny_graph.batch)

    def fitted(k: int) -> set[str]:
        return {candidate_id(f) for s in warm_schedules(recs[vs[k].key][key])
                if (f := fit_schedule(space, tiny_graph, s, vs[2].target)) is not None}

    near_best, far_best = fitted(1), fitted(0)
    seeds, _ = _warm_from(str(log), tasks, vs[2], vs[:2], False)
    got = {candidate_id(s) for s in seeds[key]}
    assert got == near_best and far_best - near_best, "the far variant's best should differ"
    assert not got & (far_best - near_best)
    assert prior_rows(vs[2], vs[:2], 400) == {vs[1].key: 400, vs[0].key: 25}


@pytest.mark.slow
def test_a_sigkilled_sweep_re_run_measures_nothing_twice_and_gives_the_same_table(
        tiny_onnx: Path, tmp_path: Path) -> None:
    """Acceptance (issue 22): SIGKILL mid-sweep (in the second variant), re-run: no candidate
    measured twice on a variant, and the table equals an uninterrupted run's (same seed).
    With ``--allocate equal``: an adaptive sweep's remaining chunks may go elsewhere after a
    kill (``autotune/whatif/_budget.py``); its re-run is tested in test_sweep_hedge.py."""
    import json
    import signal
    import subprocess
    import sys
    import time

    exe = str(Path(sys.executable).parent / "graphtune")

    def cmd(name: str) -> list[str]:
        return [exe, "sweep", str(tiny_onnx), "--set", "l1.data_bytes=64K,1M",
                "--trials-per-variant", "30", "--allocate", "equal", "--workers", "0",
                "--seed", "4", "--log",
                str(tmp_path / f"{name}.jsonl"), "-o", str(tmp_path / name), "--json"]

    log = tmp_path / "killed.jsonl"
    p = subprocess.Popen(cmd("killed"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while p.poll() is None and not (log.exists() and log.read_text().count("\n") >= 40):
        time.sleep(0.05)
    assert p.poll() is None, "the sweep ended before it could be killed"
    p.send_signal(signal.SIGKILL)
    p.wait()
    at_kill = log.read_text().count("\n")
    assert 30 <= at_kill < 60
    resumed = json.loads(subprocess.run(cmd("killed"), capture_output=True, text=True,
                                        check=True).stdout.splitlines()[-1])
    full = json.loads(subprocess.run(cmd("full"), capture_output=True, text=True,
                                     check=True).stdout.splitlines()[-1])
    from autotune.sampling._studies import candidate_id
    from compiler.schedule import GraphSchedule

    seen: set[tuple[str, str]] = set()
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(records) == 60
    for r in records:
        k = (r["target"]["chip"], candidate_id(GraphSchedule.from_json(r["schedule"])))
        assert k not in seen, f"{k} measured twice"
        seen.add(k)
    assert resumed["rows"] == full["rows"]


def test_warm_seeds_the_roofline_puts_behind_the_levels_are_dropped(tiny_graph: Graph) -> None:
    """A warm seed whose roofline estimate on the target is slower than the fastest level's
    is not measured first; one as fast or faster is."""
    import numpy as np

    import cost_model
    from autotune.sampling._studies import seed_schedules
    from autotune.sampling._warm import _not_behind

    target = BASE.replace(l1={"data_bytes": 64 * 1024})
    levels = dict(seed_schedules(tiny_graph, target))
    est = dict(zip(levels, cost_model.analytical_cycles(np.asarray(
        cost_model.features(tiny_graph, list(levels.values()), target)))))
    slow, fast = max(est, key=est.__getitem__), min(est, key=est.__getitem__)
    assert est[slow] > est[fast]
    others = [levels[k] for k in levels if k not in (slow, fast)]
    kept = _not_behind(tiny_graph, [(levels[slow], {"n": 0}), (levels[fast], {"n": 1})],
                       others, target)
    assert [p for _, p in kept] == [{"n": 1}]


def test_a_level_that_overflows_is_no_baseline_for_the_warm_seeds(tiny_graph: Graph) -> None:
    """ResNet-50 b16 at L1 384K (h70): the guide's plan overflows and its roofline estimate is
    below every schedule's that fits, so it dropped every seed. A seed behind an overflowing
    level but ahead of every level that fits is kept; behind a fitting one it is dropped;
    with no level that fits, every seed is kept."""
    import numpy as np

    import cost_model
    from autotune.sampling._warm import _not_behind
    from compiler.capacity import check_capacity, in_compute_dtype
    from search_space import build_space

    target = BASE.replace(l1={"data_bytes": 16 * 1024})
    g = in_compute_dtype(tiny_graph, target)
    space = build_space(tiny_graph, target, tiny_graph.batch)
    rng = np.random.default_rng(0)
    pool = [space.sample(rng, uniform=i % 2 == 0) for i in range(300)]
    est = cost_model.analytical_cycles(np.asarray(cost_model.features(tiny_graph, pool, target)))
    fit = sorted((float(e), i) for i, (s, e) in enumerate(zip(pool, est))
                 if check_capacity(g, s, target) is None)
    over = sorted((float(e), i) for i, (s, e) in enumerate(zip(pool, est))
                  if check_capacity(g, s, target) is not None)
    assert over, "need a schedule that overflows"
    # an overflowing schedule estimated faster than a fitting seed, itself ahead of a fitting level
    between = [(e, i) for e, i in fit if over[0][0] < e < fit[-1][0]]
    assert between, "need a fitting schedule between the overflow's estimate and the slowest's"
    seed, slower = pool[between[0][1]], pool[fit[-1][1]]
    overflowing = pool[over[0][1]]
    picked = [(seed, {"n": 0})]
    assert _not_behind(tiny_graph, picked, [overflowing, slower], target) == picked
    assert _not_behind(tiny_graph, [(slower, {"n": 1})], [overflowing, seed], target) == []
    assert _not_behind(tiny_graph, [(slower, {"n": 1})], [overflowing], target) == [(slower, {"n": 1})]


@settings(max_examples=40, deadline=None)
@given(st.lists(pick, min_size=1, max_size=8, unique_by=lambda v: v.name))
def test_the_sweep_tunes_the_bases_nearest_variants_first(vs: list[Variant]) -> None:
    """Invariant: a permutation, non-decreasing in the distance from the base target (the
    STCP920: L1 1M, DDR 27 B/cycle), ties in the order given."""
    from autotune.whatif._nearest import from_base, tuning_order

    order = tuning_order(vs)
    assert sorted(order) == list(range(len(vs)))
    d = [from_base(vs[i]) for i in order]
    assert d == sorted(d)
    for k in range(len(order) - 1):
        if d[k] == d[k + 1]:
            assert order[k] < order[k + 1]
    grid = _variants(["384K", "1M"], ["13", "27"])
    assert grid[tuning_order(grid)[0]].name == "STCP920+l1.data_bytes=1M,ddr.bytes_per_cycle=27"


def test_the_warm_ranker_learns_from_the_task_alone_once_it_has_enough_rows(
        tiny_graph: Graph) -> None:
    """Below ``own_enough`` rows the prior shapes the model; from there on it is the cold
    ranker's model (the task's own rows alone, same seed: the same predictions)."""
    import numpy as np

    import cost_model
    from autotune.sampling._ranker import CostModelRanker
    from autotune.sampling._warm import PriorData, WarmRanker
    from search_space import build_space
    from sim import measure

    other, mine = BASE.replace(ddr={"bytes_per_cycle": 13}), BASE.replace(l1={"data_bytes": 65536})
    rng = np.random.default_rng(1)
    rows = {}
    for t in (other, mine):
        space = build_space(tiny_graph, t, tiny_graph.batch)
        pool = [space.sample(rng, uniform=i % 2 == 0) for i in range(80)]
        ok = [(s, m.throughput_per_s) for s, m in zip(pool, measure(tiny_graph, pool, t))
              if m.status == "ok"]
        rows[t.key] = (np.asarray(cost_model.features(tiny_graph, [s for s, _ in ok], t)),
                       np.asarray([v for _, v in ok], dtype=np.float64))
    px, py = rows[other.key]
    x, y = rows[mine.key]
    n = WarmRanker.own_enough
    assert len(y) > n
    warm = WarmRanker(tiny_graph, mine, seed=0, prior=PriorData(px, py, np.zeros(len(py), dtype=np.int64)))
    warm.check_at = n  # the rank check is tested on its own (test_sweep_hedge.py)
    cold = CostModelRanker(tiny_graph, mine, seed=0)
    warm.fit(x[:n - 1], y[:n - 1])
    assert "prior=" in warm.label
    warm.fit(x[:n], y[:n])
    cold.fit(x[:n], y[:n])
    assert warm.label == f"xgb-warm/own/n={n}"
    np.testing.assert_allclose(warm.predict(x), cold.predict(x))
