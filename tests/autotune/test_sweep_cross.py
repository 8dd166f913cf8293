"""Late in a sweep every variant takes the others' bests (``autotune.whatif._nearest.cross_sources``,
``autotune.whatif._sweep._cross_round``), those of the variants it dominates first."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from autotune.whatif._budget import CROSS_MOST, allot, cross_reserve, probe_size
from autotune.whatif._nearest import cross_sources, dominates, seed_sources
from autotune.whatif._targets import Variant, make_variants, parse_set
from compiler.graph import Graph
from compiler.target import Target

BASE = Target.default()
L1 = [f"{k}K" for k in (64, 256, 384, 512, 768, 1024)]
DDR = ["7", "13", "27", "54"]
ALL = make_variants(BASE, [parse_set("l1.data_bytes=" + ",".join(L1)),
                           parse_set("ddr.bytes_per_cycle=" + ",".join(DDR))])
pick = st.sampled_from(ALL)


def _size(v: Variant) -> tuple[float, float]:
    t = v.target.to_dict()
    return float(t["l1"]["data_bytes"]), float(t["ddr"]["bytes_per_cycle"])


@settings(max_examples=80, deadline=None)
@given(pick, pick, pick)
def test_dominance_is_more_of_every_resource_and_a_partial_order(a: Variant, b: Variant,
                                                                  c: Variant) -> None:
    """Over L1 and DDR rate: ``a`` dominates ``b`` exactly when both are at least ``b``'s;
    reflexive, antisymmetric, transitive."""
    (la, da), (lb, db) = _size(a), _size(b)
    assert dominates(a, b) == (la >= lb and da >= db)
    assert dominates(a, a)
    if dominates(a, b) and dominates(b, a):
        assert a.key == b.key
    if dominates(a, b) and dominates(b, c):
        assert dominates(a, c)


def test_a_latency_dominates_when_smaller_and_an_unordered_key_never() -> None:
    """Less DDR latency is more; a granule is neither (another shape, not more hardware)."""
    lat = make_variants(BASE, [parse_set("ddr.latency_cycles=100,200")])
    assert dominates(lat[0], lat[1]) and not dominates(lat[1], lat[0])
    gran = make_variants(BASE, [parse_set("matrix.granule_m=16,32")])
    assert not dominates(gran[0], gran[1]) and not dominates(gran[1], gran[0])


@settings(max_examples=60, deadline=None)
@given(pick, st.lists(pick, min_size=1, max_size=10, unique_by=lambda v: v.key))
def test_late_seeds_come_from_every_other_variant_dominated_first(v: Variant,
                                                                   others: list[Variant]) -> None:
    """``seed_sources`` and ``cross_sources`` together are every other variant, once; in
    ``cross_sources`` the variants ``v`` dominates come before the others."""
    others = [o for o in others if o.key != v.key]
    near = seed_sources(v, others)
    late = cross_sources(v, others)
    assert sorted(f.key for f in near + late) == sorted(o.key for o in others)
    flags = [dominates(v, f) for f in late]
    assert flags == sorted(flags, reverse=True)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.floats(100.0, 1e4), min_size=0, max_size=120), min_size=1, max_size=8),
       st.integers(8, 60))
def test_the_chunks_leave_the_cross_rounds_reserve(curves: list[list[float]], per: int) -> None:
    """With a reserve, the chunks' allotment stays ``reserve`` below the total."""
    keys = [f"v{i}" for i in range(len(curves))]
    hist = {k: [float(x) for x in c] for k, c in zip(keys, curves)}
    reserve = cross_reserve(len(keys))
    assert reserve == len(keys) * min(CROSS_MOST, len(keys) - 1)
    budget, handed = allot(hist, keys, per, None, reserve)
    if handed:
        assert sum(max(budget[k], len(hist[k])) for k in keys) <= per * len(keys) - reserve
    else:
        assert set(budget.values()) == {probe_size(per)}


def test_the_cross_round_measures_the_others_bests_on_every_variant(tiny_graph: Graph,
                                                                   tmp_path: Path) -> None:
    """Four variants tuned independently (12 each, no warm start), then the final cross-round
    (``_cross_round``, 7 more per variant allowed): each variant measures the other
    variants' bests (made to fit it) that it had not measured, at most 3 here; so a
    variant's best is never slower than the best of one it dominates run on it; a second
    round measures nothing."""
    from autotune._options import RunOptions, SearchOptions
    from autotune._tune import load_tasks, tune
    from autotune.sampling._studies import candidate_id
    from autotune.whatif._sweep import _cross_round, _cross_seeds, _histories, _records, _unmeasured, sweep
    from compiler.schedule import GraphSchedule

    vs = make_variants(BASE, [parse_set("l1.data_bytes=16K,64K"), parse_set("ddr.bytes_per_cycle=7,27")])
    log = tmp_path / "s.jsonl"
    sweep([tiny_graph], vs, trials_per_variant=12, log=log, workers=0, seed=1, warm=False,
          pretrained=False, allocate="equal")
    tasks = load_tasks([tiny_graph])
    before = {k: len(h) for k, h in _histories(str(log), tasks, vs).items()}
    assert set(before.values()) == {12}

    def run(variant: Variant, trials: int, _finished: object, _extra: object, _loud: object,
            seeds: dict[str, list[object]]) -> None:
        tune(tasks, trials=trials, log=log, target=variant.target,
             search=SearchOptions(seed=1, warm_schedules=seeds, pretrained=False, seeds=False),
             run=RunOptions(workers=0, curve=False))

    calls: list[str] = []
    _cross_round(str(log), tasks, vs, {}, 12 + CROSS_MOST, run,
                 lambda _i, v, what: calls.append(what), None)
    assert calls and set(calls) == {"cross"}
    after = {k: len(h) for k, h in _histories(str(log), tasks, vs).items()}
    assert all(before[k] <= after[k] <= before[k] + len(vs) - 1 for k in before)
    for v in vs:
        others = [o for o in vs if o.key != v.key]
        assert _unmeasured(str(log), tasks, v, _cross_seeds(str(log), tasks, v, others)) == 0
    recs = _records(str(log), tasks, vs)
    key = tasks[0].key

    def cid(r: object) -> str:
        return candidate_id(GraphSchedule.from_json(dict(r.schedule)))  # type: ignore[attr-defined]

    def ok(v: Variant) -> list[object]:
        return [r for r in recs[v.key][key] if r.result.status.value == "ok" and r.result.latency_us]

    pairs = 0
    for a in vs:
        for b in vs:
            if a.key == b.key or not dominates(a, b):
                continue
            b_best = cid(min(ok(b), key=lambda r: float(r.result.latency_us)))  # type: ignore[attr-defined]
            on_a = {cid(r): float(r.result.latency_us) for r in ok(a)}  # type: ignore[attr-defined]
            assert b_best in on_a, f"{b.name}'s best was not measured on {a.name}"
            assert min(on_a.values()) <= on_a[b_best]
            pairs += 1
    assert pairs == 5
    calls.clear()
    _cross_round(str(log), tasks, vs, {}, 12 + CROSS_MOST, run,
                 lambda _i, v, what: calls.append(what), None)
    assert calls == [] and {k: len(h) for k, h in _histories(str(log), tasks, vs).items()} == after
