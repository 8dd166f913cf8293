"""A sweep's later chunks: the polish starts after half a chunk without a better best and
polishes both rings of a schedule within it (``autotune.whatif._budget.chunk_guided``); the
cross-round comes after the last chunk."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from autotune.whatif._budget import chunk_guided, chunk_size
from compiler.graph import Graph
from compiler.target import Target

BASE = Target.default()


def sweep_events(graph: Graph, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                 trials: int = 24, **kw: Any) -> list[tuple[str, Any]]:
    """Sweep ``graph`` over L1 64K and 1M, ``trials`` measurements a variant on average, in
    process (``kw``: more of :func:`sweep`'s arguments); what happened in order: ``("tune",
    its guided options)`` per tune and ``("variant", what)`` per ``on_variant`` call."""
    import autotune._tune as tune_module
    from autotune.whatif._sweep import sweep
    from autotune.whatif._targets import make_variants, parse_set

    events: list[tuple[str, Any]] = []
    real = tune_module.tune

    def spy(*args: Any, **kwargs: Any) -> Any:
        events.append(("tune", kwargs["search"].guided))
        return real(*args, **kwargs)

    monkeypatch.setattr(tune_module, "tune", spy)
    vs = make_variants(BASE, [parse_set("l1.data_bytes=64K,1M")])
    sweep([graph], vs, trials_per_variant=trials, log=tmp_path / "s.jsonl", workers=0, seed=0,
          on_variant=lambda _i, _v, what: events.append(("variant", what)), **kw)
    return events


def test_a_later_chunk_polishes_after_half_a_chunk() -> None:
    from autotune.sampling._guided import GuidedOptions

    for per in (24, 200, 400):
        o = chunk_guided(per)
        assert o.polish_after == chunk_size(per) // 2 < chunk_size(per)
        assert o.polish_after < GuidedOptions().polish_after  # a whole tune's does not fit a chunk
        # both rings of a schedule fit in what a chunk leaves the polish (the second ring held
        # the one step from 9,407.7 to 9,086.4 us on ResNet-50 1M / DDR 13, seed 1)
        assert o.polish_limit is not None and o.polish_limit + o.polish_deep <= chunk_size(per) // 2
        assert o.polish_deep > 0 and o.polish_kick == GuidedOptions().polish_kick
        # the second ring gets more: the one-step gains were there, the one-move ring's
        # neighbours mostly ran at the best's own latency (ResNet-50 1M / DDR 13, seed 1, h93)
        assert 0 < o.polish_limit < o.polish_deep


def test_only_the_later_chunks_tune_with_the_chunks_options(tiny_graph: Graph, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Two variants, 24 on average: every tune of a probe (the cold share's and the warm one's)
    has the default options; every tune after an ``on_variant(..., "more")`` (a chunk) has
    :func:`chunk_guided`'s."""
    events = sweep_events(tiny_graph, tmp_path, monkeypatch)
    what = ""
    chunks = probes = 0
    for kind, value in events:
        if kind == "variant":
            what = value
            continue
        if what == "more":
            assert value == chunk_guided(24)
            chunks += 1
        elif what == "tuning":
            assert value is None
            probes += 1
    assert probes == 3 and chunks >= 1  # two probes, the second with its cold share


def test_a_cold_reference_tunes_with_tunes_options(tiny_graph: Graph, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """``warm=False`` (``bench/sweep.py``'s cold references, the independent cold tunes the
    sweep is held to): every tune with ``tune``'s options, no tie tolerance."""
    events = sweep_events(tiny_graph, tmp_path, monkeypatch, warm=False, allocate="equal")
    tunes = [value for kind, value in events if kind == "tune"]
    assert len(tunes) == 2 and all(value is None for value in tunes)


def test_the_cross_round_comes_after_the_last_chunk(tiny_graph: Graph, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """After the probes: chunks leaving the cross-round's reserve, the round, then chunks
    leaving one measurement per other variant, then a second round; nothing after it. So a
    best that a chunk after the first round finds is still measured on the variants that
    dominate its variant (MobileNetV2 b16, seed 0, h88: L1 384K / DDR 13 reached 1,846.3 us
    in the chunk after the round and 512K / DDR 13 ended at 1,924.6). A re-run measures
    nothing and the total stays within the budget."""
    import autotune.whatif._sweep as sw
    from autotune.whatif._budget import cross_reserve
    from autotune.whatif._targets import make_variants, parse_set

    calls: list[tuple[str, int]] = []
    spend, cross = sw._spend_the_rest, sw._cross_round

    def spy_spend(*args: Any, **kwargs: Any) -> None:
        calls.append(("chunks", args[8] if len(args) > 8 else kwargs.get("reserve", 0)))
        spend(*args, **kwargs)

    def spy_cross(*args: Any, **kwargs: Any) -> None:
        calls.append(("cross", 0))
        cross(*args, **kwargs)

    monkeypatch.setattr(sw, "_spend_the_rest", spy_spend)
    monkeypatch.setattr(sw, "_cross_round", spy_cross)
    vs = make_variants(BASE, [parse_set("l1.data_bytes=64K,1M"), parse_set("ddr.bytes_per_cycle=13,27")])
    log = tmp_path / "s.jsonl"
    res = sw.sweep([tiny_graph], vs, trials_per_variant=24, log=log, workers=0, seed=0)
    assert calls == [("chunks", cross_reserve(4)), ("cross", 0), ("chunks", 3), ("cross", 0)]
    assert res.measured <= 24 * 4
    assert sw.sweep([tiny_graph], vs, trials_per_variant=24, log=log, workers=0, seed=0).measured == 0
