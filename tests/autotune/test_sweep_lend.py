"""Lending (``autotune.whatif._budget.lend_to``): a stalled variant's chunk goes to a variant it
dominates whose best is as fast (``bench/results/sweep.md``, twenty-first pass)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autotune.whatif._budget import TWIN, allot, chunk_size, cross_reserve, lend_to, probe_size
from autotune.whatif._nearest import dominates, lenders
from autotune.whatif._targets import make_variants, parse_set
from compiler.target import Target

BASE = Target.default()
DATA = Path(__file__).parent / "data" / "sweep_lend_mbs0.json"


def _flat(n: int, at: float) -> list[float | None]:
    return [at] * n


def test_lend_to_needs_a_stall_and_a_dominated_twin() -> None:
    """Stalled (the last chunk left the best as it was) with a twin below (best within
    :data:`TWIN`): the first such twin in ``below``'s order; not stalled, no twin, a twin's best
    farther than TWIN, or nobody below: None."""
    per = 200
    c = chunk_size(per)
    stuck = [2000.0] * probe_size(per) + [1663.5] * (2 * c)
    falling = [2000.0] * probe_size(per) + [1700.0] * c + [1663.5] * c
    falling[-1] = 1663.0
    hist = {"a": stuck, "b": [1663.5] * 200, "c": [1663.5 * (1 + 2 * TWIN)] * 200, "d": [1663.4] * 120}
    assert lend_to("a", stuck, ["b"], hist, per) == "b"
    assert lend_to("a", stuck, ["c", "d", "b"], hist, per) == "d"  # the first within TWIN
    assert lend_to("a", stuck, ["c"], hist, per) is None  # not the same basin
    assert lend_to("a", stuck, [], hist, per) is None
    assert lend_to("a", falling, ["b"], hist, per) is None  # its last chunk still gained
    assert lend_to("a", stuck[:probe_size(per) + c - 1], ["b"], hist, per) is None  # no chunk yet
    assert lend_to("a", stuck, ["e"], hist, per) is None  # a variant with no record


def test_lenders_are_the_dominated_variants_most_constrained_first() -> None:
    """Over L1 x DDR each variant lends to every variant it dominates (their schedules fit it),
    the one the most variants dominate first; the smallest, slowest variant to nobody."""
    vs = make_variants(BASE, [parse_set("l1.data_bytes=384K,512K,1M"),
                              parse_set("ddr.bytes_per_cycle=13,27")])
    below = lenders(vs)
    name = {v.key: v.name.split("+")[1] for v in vs}
    by = {name[k]: [name[x] for x in v] for k, v in below.items()}
    small_slow = "l1.data_bytes=384K,ddr.bytes_per_cycle=13"
    assert by[small_slow] == []
    assert by["l1.data_bytes=512K,ddr.bytes_per_cycle=27"][0] == small_slow
    assert set(by["l1.data_bytes=512K,ddr.bytes_per_cycle=27"]) == {
        small_slow, "l1.data_bytes=384K,ddr.bytes_per_cycle=27", "l1.data_bytes=512K,ddr.bytes_per_cycle=13"}
    key = {v.key: v for v in vs}
    over = {w.key: sum(dominates(v, w) for v in vs if v.key != w.key) for w in vs}
    for k, ks in below.items():
        assert all(dominates(key[k], key[x]) and x != k for x in ks)
        assert len(ks) == sum(dominates(key[k], w) for w in vs if w.key != k)
        assert [over[x] for x in ks] == sorted((over[x] for x in ks), reverse=True)


def test_the_twentieth_pass_mbs0_chunk_goes_to_the_stuck_384k() -> None:
    """The twentieth pass's MobileNetV2 seed-0 log at its 1,300th record: without lending the
    allotment hands the next chunk to 512K / DDR 27 (as the log did), stalled at 1,663.5 since
    its 54th; with lending to 384K / DDR 27, the miss, at the same 1,663.5; both within the
    total, and lending moves nothing else at that point. Once the lent chunk is measured
    (without a gain), 384K / DDR 27 still gets its own next chunk: the lent one was 512K's."""
    d = json.loads(DATA.read_text())
    keys, hist, floors = d["keys"], d["histories"], d["floors"]
    mbit = {k: (k.split("/")[0], int(k.split("/")[1])) for k in keys}
    size = {"384K": 384, "512K": 512, "768K": 768, "1M": 1024}
    # who dominates whom: more L1 and more DDR (lenders' order: the most dominated first)
    dom = {a: [b for b in keys if b != a and size[mbit[b][0]] <= size[mbit[a][0]]
               and mbit[b][1] <= mbit[a][1]] for a in keys}
    over = {b: sum(b in v for v in dom.values()) for b in keys}
    below = {a: sorted(v, key=lambda b: -over[b]) for a, v in dom.items()}
    total = 200 * len(keys) - cross_reserve(len(keys))
    plain, handed = allot(hist, keys, 200, floors, cross_reserve(len(keys)))
    lent, handed_lent = allot(hist, keys, 200, floors, cross_reserve(len(keys)), below)
    assert handed[-1] == d["next_in_the_log"] == "512K/27"
    assert handed_lent[-1] == "384K/27"
    assert handed_lent[:-1] == handed[:-1]
    assert lent["384K/27"] == plain["384K/27"] + chunk_size(200) and lent["512K/27"] == plain["512K/27"] - 50
    assert sum(lent.values()) == sum(plain.values()) <= total
    # the lent chunk measured without a gain (as the first run with lending did): the borrower
    # keeps its own next chunk (the twentieth pass's log gave it 384K / DDR 27 at its 1,350th)
    hist["384K/27"] = hist["384K/27"] + hist["384K/27"][-1:] * chunk_size(200)
    after, handed_after = allot(hist, keys, 200, floors, cross_reserve(len(keys)), below)
    assert handed_after[-1] == "384K/27" and after["384K/27"] == lent["384K/27"] + chunk_size(200)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(st.sampled_from([1.0, 2.0, 3.0]), min_size=0, max_size=90), min_size=1, max_size=5),
       st.integers(8, 40), st.data())
def test_lending_keeps_the_total_and_without_a_twin_changes_nothing(
        curves: list[list[float]], per: int, data: st.DataObject) -> None:
    """With any ``below``, the allotment stays within the total and is a function of the
    histories (the same answer twice); where no two variants' bests are within TWIN, it is the
    allotment without lending."""
    keys = [f"v{i}" for i in range(len(curves))]
    hist: dict[str, list[float | None]] = {k: [float(x) for x in c] for k, c in zip(keys, curves)}
    below = {k: data.draw(st.lists(st.sampled_from([x for x in keys if x != k] or ["none"]),
                                   unique=True, max_size=3)) for k in keys}
    budget, handed = allot(hist, keys, per, None, 0, below)
    assert sum(budget.values()) <= per * len(keys)
    assert allot(hist, keys, per, None, 0, below) == (budget, handed)
    assert set(handed) <= set(keys)
    distinct = {k: [x + 0.001 * i for x in c] for i, (k, c) in enumerate(hist.items())}
    # bests 0.001 * i apart (> TWIN of 3.0 and below): never one basin
    assert allot(distinct, keys, per, None, 0, below) == allot(distinct, keys, per, None, 0, None)


def test_a_lender_lends_until_its_score_falls_then_the_others_get_theirs() -> None:
    """The sweep's loop (allot, measure the chunk handed out, allot again), simulated: a
    stalled variant far above its floor keeps the top score, but each chunk it lends counts as
    records without a gain, so it does not lend the whole rest to its twin, and a third
    variant still improving gets chunks too; all within the total."""
    per = 100
    p, c = probe_size(per), chunk_size(per)
    hist: dict[str, list[float | None]] = {
        "a": [3000.0] * p + [2000.0] * (2 * c),  # stalled over its last chunk, far above its floor
        "b": [2500.0] * (p - 5) + [2000.0] * 5,  # its twin below, as fast (in its probe)
        "g": [1800.0 - i for i in range(p + c)]}  # still falling
    keys, floors = ["a", "b", "g"], {"a": 100.0, "b": 1990.0, "g": 1000.0}
    got: list[str] = []
    while True:
        budget, handed = allot(hist, keys, per, floors, 0, {"a": ["b"]})
        if not handed or len(hist[handed[-1]]) >= budget[handed[-1]]:
            break
        k = handed[-1]
        got.append(k)
        last = hist[k][-1]
        assert last is not None
        step = 1.0 if k == "g" else 0.0
        hist[k] += [last - step * (i + 1) for i in range(budget[k] - len(hist[k]))]
    assert "b" in got and "g" in got, got
    assert len(hist["a"]) == p + 2 * c  # a lent every chunk it was picked for after its stall
    assert sum(len(h) for h in hist.values()) <= 3 * per


def test_a_sweep_passes_the_lenders_only_with_lend(tiny_graph: Any, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """``sweep(lend=True)`` (the default) gives the allotment each live variant's lenders
    (:func:`lenders`), ``lend=False`` None."""
    import autotune.whatif._sweep as sweep_module

    seen: list[Any] = []
    real = sweep_module.allot

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(args[5] if len(args) > 5 else kwargs.get("below"))
        return real(*args, **kwargs)

    monkeypatch.setattr(sweep_module, "allot", spy)
    vs = make_variants(BASE, [parse_set("l1.data_bytes=64K,1M")])
    for lend in (True, False):
        seen.clear()
        sweep_module.sweep([tiny_graph], vs, trials_per_variant=24, log=tmp_path / f"l{lend}.jsonl",
                           workers=0, seed=0, pretrained=False, lend=lend)
        assert seen
        if lend:
            assert all(b == lenders(vs) for b in seen)
        else:
            assert all(b is None for b in seen)
