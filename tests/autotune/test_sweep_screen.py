"""A sweep's tunes may breed more per measurement than a tune (``sweep(screen=True)``,
``autotune.whatif._budget.screened``; issue 22, h104: measured no better, so off by default);
``tune``'s own options and a default sweep's are unchanged."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from autotune.whatif._budget import GENERATIONS, POPULATION, chunk_guided, screened
from compiler.graph import Graph
from tests.autotune.test_sweep_chunks import sweep_events


def test_tunes_defaults_are_unchanged() -> None:
    """A tune's guided sampler breeds as before: 96 x 2 generations around 8 parents, 16
    proposals a round, and ``tune`` is given no options unless asked."""
    from autotune._options import SearchOptions
    from autotune.sampling._guided import GuidedOptions

    o = GuidedOptions()
    assert (o.population, o.generations, o.proposals, o.parents) == (96, 2, 16, 8)
    assert (o.random_share, o.crossover, o.eps, o.screen, o.breed_budget) == (0.25, 0.15, 0.1, None, None)
    assert SearchOptions().guided is None


@pytest.mark.parametrize("base", [None, chunk_guided(200), chunk_guided(24)])
def test_screened_breeds_more_per_measurement_and_changes_nothing_else(base: Any) -> None:
    from autotune.sampling._guided import GuidedOptions

    o, b = screened(base), base or GuidedOptions()
    assert (o.population, o.generations) == (POPULATION, GENERATIONS)
    assert o.proposals == b.proposals  # the same proposals a round: more bred per proposal
    assert o.population * o.generations > b.population * b.generations
    assert replace(o, population=b.population, generations=b.generations) == b


@pytest.mark.parametrize("warm,screen,expect", [(True, None, False), (True, True, True),
                                                (False, True, True)])
def test_a_sweep_screens_only_when_asked(tiny_graph: Graph, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch, warm: bool,
                                         screen: bool | None, expect: bool) -> None:
    """By default (``screen`` not given) every tune of a warm sweep has a tune's options
    (None); with ``screen=True`` every one but a probe's cold share has :func:`screened`'s,
    warm or not (the bench's ``--screen cold``: a cold reference with it)."""
    kw = {} if screen is None else {"screen": screen}
    events = sweep_events(tiny_graph, tmp_path, monkeypatch, trials=12, warm=warm,
                          allocate="equal", **kw)
    seen = [value for kind, value in events if kind == "tune"]
    cold_shares = 1 if warm else 0  # the second variant's probe: a cold reference's start
    assert len(seen) == 2 + cold_shares
    assert sum(g is None for g in seen) == (cold_shares if expect else len(seen))
    assert all(g == screened() for g in seen if g is not None)


def test_a_screened_sweeps_chunks_are_screened_chunks(tiny_graph: Graph, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """``screen=True`` with the adaptive allocation: a later chunk's options are
    :func:`chunk_guided`'s (its polish) with :func:`screened`'s breeding."""
    what, chunks = "", 0
    for kind, value in sweep_events(tiny_graph, tmp_path, monkeypatch, screen=True):
        if kind == "variant":
            what = value
        elif what == "more":
            assert value == screened(chunk_guided(24))
            chunks += 1
    assert chunks >= 1
