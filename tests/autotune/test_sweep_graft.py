"""Grafts (``autotune.whatif._graft``): a window of another variant's schedule carried into a
variant's best, the sweep's way into a basin that its warm starts and the tune's moves miss
(``bench/results/sweep.md``, eighteenth pass)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autotune.whatif._targets import make_variants, parse_set
from compiler.graph import Graph
from compiler.target import Target

BASE = Target.default()
DATA = Path(__file__).parent / "data" / "sweep_graft_r50.jsonl"
VARIANT = make_variants(BASE, [parse_set("l1.data_bytes=512K"), parse_set("ddr.bytes_per_cycle=13")])[0]


def _resnet50(batch: int, **options: Any) -> Graph:
    from compiler import zoo
    from compiler.model import Model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Model(zoo.build("resnet50", batch=batch, weights="inputs", **options), name="resnet50").graph


class Recorded(NamedTuple):
    """A test log's one record on its sweep variant: the record, the variant's target and
    space, the record's vector, and a vector's simulated latency (inf: it does not fit),
    memoised."""

    rec: Any
    target: Target
    space: Any
    base: np.ndarray
    lat: Callable[[np.ndarray], float]


def recorded(graph: Graph, data: Path, batch: int, *sets: str) -> Recorded:
    """:class:`Recorded` of the one record of ``data`` on the variant ``sets`` (``--set``
    texts) of the default target; the record is of that variant."""
    from compiler.schedule import GraphSchedule
    from logs import read_records
    from search_space import build_space
    from sim import SimError, simulate

    (rec,) = list(read_records(data))
    variant = make_variants(BASE, [parse_set(x) for x in sets])[0]
    assert str(rec.target) == variant.key
    t = variant.target
    space = build_space(graph, t, batch)
    memo: dict[bytes, float] = {}

    def lat(w: np.ndarray) -> float:
        key = w.tobytes()
        if key not in memo:
            r = simulate(graph, space.decode(w), t, timeline=False)
            memo[key] = float("inf") if isinstance(r, SimError) else float(r.latency_us)
        return memo[key]

    return Recorded(rec, t, space, space.encode(GraphSchedule.from_json(dict(rec.schedule))), lat)


@pytest.fixture(scope="module")
def r50() -> Graph:
    """ResNet-50 b16, the model of the sweep's miss."""
    return _resnet50(16)


class _Small(tuple):  # type: ignore[type-arg]
    def __repr__(self) -> str:  # hypothesis prints its arguments: not the whole graph
        return "small"


@pytest.fixture(scope="module")
def small() -> Any:
    """A ResNet-50 b2 at 64x64 and its space on the 512K / DDR 13 variant."""
    from search_space import build_space

    g = _resnet50(2, image_size=64)
    return _Small((g, build_space(g, VARIANT.target, 2)))


def _starts(space: Any, vec: np.ndarray) -> list[int]:
    from autotune.whatif._graft import _view

    return _view(space, vec)[1]


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 4))
def test_a_graft_is_the_donor_inside_its_window_and_the_base_outside(small: Any, seed: int,
                                                                      span: int) -> None:
    """For every graft ``(a, b)`` of two sampled schedules: its group starts in ``[a, b]``
    are the donor's, those outside the base's; a group's parameters (non-cut) at ops in
    ``[a, b)`` are the donor's, before ``a`` and after ``b`` the base's; the globals the
    base's; windows are 1 to ``span`` donor groups; every graft decodes."""
    from autotune.whatif._graft import _view, graft_vectors

    g, space = small
    rng = np.random.default_rng(seed)
    base = space.encode(space.sample(rng))
    donor = space.encode(space.sample(rng))
    n = len(g.ops)
    cut = np.array([f.kind == "cut" for f in space.free])
    at = np.array([f.at for f in space.free])
    d_starts = [*_starts(space, donor), n]
    b_starts = set(_starts(space, base))
    grafts = graft_vectors(space, base, donor, n, span)
    if _view(space, base)[0] == 0:  # no boundaries at the base's granularity: no graft
        assert grafts == []
        return
    for (a, b), w in grafts:
        assert a in d_starts and b in d_starts and 1 <= d_starts.index(b) - d_starts.index(a) <= span
        inside = [s for s in _starts(space, w) if a <= s <= b]
        assert inside == [s for s in d_starts if a <= s <= b and s < n]
        assert [s for s in _starts(space, w) if not a <= s <= b] == sorted(
            s for s in b_starts if not a <= s <= b)
        assert np.array_equal(w[~cut & (at >= a) & (at < b)], donor[~cut & (at >= a) & (at < b)])
        assert np.array_equal(w[~cut & ((at < a) | (at > b))], base[~cut & ((at < a) | (at > b))])
        assert (at[w != base] >= a - 1).all()
        space.decode(w)


def test_the_misss_basin_is_one_graft_away_and_ranked_first(r50: Graph) -> None:
    """The sweep's best of ResNet-50 b16 at L1 512K / DDR 13 (seed 0: 13,033.9 µs, the cold
    tune 12,358.4) and a schedule measured on L1 1M / DDR 27 (6,883.4 µs there, 34th of its
    variant, so no warm start carries it): one window of the second grafted into the first
    is 12,120.5 µs (the last stage's first block's main branch in a group of 2 steps), the
    whole second made to fit 12,241.7; ``graft_seeds`` ranks one of them among its first 4
    of the ~30."""
    from autotune.whatif._graft import graft_seeds, graft_vectors
    from compiler.schedule import GraphSchedule
    from logs import read_records
    from search_space import build_space
    from sim import SimError, simulate

    own, donor = list(read_records(DATA))
    assert str(own.target).startswith(VARIANT.key.split(":")[0])
    t = VARIANT.target
    space = build_space(r50, t, 16)

    def lat(s: GraphSchedule) -> float:
        r = simulate(r50, s, t, timeline=False)
        return float("inf") if isinstance(r, SimError) else float(r.latency_us)

    base_s = GraphSchedule.from_json(dict(own.schedule))
    assert lat(base_s) == pytest.approx(13033.93, abs=0.01)
    donor_s = space.project_nearest(GraphSchedule.from_json(dict(donor.schedule))).schedule
    assert donor_s is not None and lat(donor_s) == pytest.approx(12241.67, abs=0.01)
    grafts = graft_vectors(space, space.encode(base_s), space.encode(donor_s), len(r50.ops))
    best = min(lat(space.decode(w)) for _, w in grafts)
    assert best == pytest.approx(12120.46, abs=0.01)
    picked = graft_seeds(space, r50, t, [own], [donor], count=4, seed=0)
    assert picked and min(lat(s) for s in picked) <= 12358.4 / 0.99


def test_a_sweep_measures_its_grafts_in_later_chunks_only(tiny_graph: Graph, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """``sweep(graft=k)`` asks for grafts in a warm variant's later chunks (never in a probe
    or a sweep without warm start), at most ``k``, and measures what it gets; ``graft=0``
    asks for none."""
    import autotune.whatif._sweep as sweep_module
    from autotune._tune import load_tasks
    from autotune.sampling._studies import candidate_id
    from compiler.schedule import GraphSchedule

    calls: list[tuple[int, list[str]]] = []
    real = sweep_module.graft_seeds

    def spy(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        calls.append((args[5] if len(args) > 5 else kwargs["count"], [candidate_id(s) for s in out]))
        return out

    monkeypatch.setattr(sweep_module, "graft_seeds", spy)
    vs = make_variants(BASE, [parse_set("l1.data_bytes=64K,1M")])
    for k, warm in ((0, True), (3, False), (3, True)):
        log = tmp_path / f"s{k}{warm}.jsonl"
        calls.clear()
        sweep_module.sweep([tiny_graph], vs, trials_per_variant=24, log=log, workers=0, seed=0,
                           warm=warm, pretrained=False, graft=k, regroup=0)
        if k == 0 or not warm:
            assert calls == []
            continue
        assert calls and all(n == k for n, _ in calls)
        recs = sweep_module._records(str(log), load_tasks([tiny_graph]), vs)
        measured = {candidate_id(GraphSchedule.from_json(dict(r.schedule)))
                    for by in recs.values() for rs in by.values() for r in rs}
        assert all(len(ids) <= k and set(ids) <= measured for _, ids in calls)
        assert any(ids for _, ids in calls)  # some graft was found, and measured


def test_a_memo_kept_over_calls_picks_what_a_fresh_one_picks(small: Any, tmp_path: Path) -> None:
    """``graft_seeds`` with one memo kept over a variant's successive calls returns the
    schedules a fresh memo returns at each call, in order, while the variant's best (the
    base every graft is made from), its measurements (what the cost model learns, what is
    dropped as measured) and the donors change from call to call: the memo (each record's
    vector, each graft's canonical vector or its overflow, each schedule's feature row)
    only saves work (h111: -20 to -33 % of the grafts' CPU on the eighteenth pass's logs,
    the same picks)."""
    import dataclasses

    import autotune.whatif._sweep as sweep_module
    from autotune._tune import load_tasks
    from autotune.sampling._studies import candidate_id
    from autotune.whatif._graft import graft_seeds
    from search_space import build_space

    graph = small[0]
    vs = make_variants(BASE, [parse_set("l1.data_bytes=384K,1M")])
    log = tmp_path / "s.jsonl"
    sweep_module.sweep([graph], vs, trials_per_variant=24, log=log, workers=0, seed=0,
                       pretrained=False, graft=0)
    (task,) = load_tasks([graph])
    recs = list(sweep_module._sim_records(str(log), [task], vs))
    v = vs[0]
    space = build_space(task.graph, v.target, task.batch)
    others = [r for r in recs if str(r.target) != v.key]
    # as the variant's own: every record (>= 32 rows, so the trees rank, not the prior)
    mine = [r for r in recs if r.result.latency_us]
    assert len(mine) >= 32
    rng = np.random.default_rng(0)
    kept: dict[str, dict[Any, Any]] = {}
    bases, ranked = set(), 0
    for call in range(6):
        # another best and other labels at each call: the latencies dealt out anew
        lat = rng.permutation([float(r.result.latency_us or 0.0) for r in mine])
        own = [dataclasses.replace(r, result=dataclasses.replace(r.result, latency_us=x,
                                                                 throughput_per_s=1e6 / x))
               for r, x in zip(mine, lat, strict=True)][: len(mine) - call]
        donors = others[: len(others) - 2 * call]
        bases.add(candidate_id(GraphSchedule_of(min(own, key=lambda r: r.result.latency_us))))
        for count in (1, 3):
            memo = kept.setdefault(str(count), {})
            again = graft_seeds(space, task.graph, v.target, own, donors, count, 0, memo)
            fresh = graft_seeds(space, task.graph, v.target, own, donors, count, 0, {})
            assert [candidate_id(s) for s in again] == [candidate_id(s) for s in fresh]
            ranked += len(fresh) == count
    assert len(bases) > 2 and ranked  # the base changed, and calls ranked more than they returned


def GraphSchedule_of(rec: Any) -> Any:  # noqa: N802 - a record's schedule
    from compiler.schedule import GraphSchedule

    return GraphSchedule.from_json(dict(rec.schedule))
