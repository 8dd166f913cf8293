"""The sweep's warm tunes breed more per measurement than a tune (issue 22, h104:
``autotune.whatif._budget.screened``); ``tune``'s own options, and a sweep's without warm
start (the bench's cold references), are unchanged."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from autotune.whatif._budget import GENERATIONS, POPULATION, chunk_guided, screened
from compiler.graph import Graph
from compiler.target import Target


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


@pytest.mark.parametrize("warm,screen,expect", [(False, None, False), (False, True, True),
                                                (True, False, False)])
def test_a_sweep_screens_when_warm_or_asked(tiny_graph: Graph, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch, warm: bool,
                                            screen: bool | None, expect: bool) -> None:
    """Without warm start (the bench's cold references) every tune has a tune's options; with
    ``screen=True`` screened ones; a warm sweep with ``screen=False`` none screened."""
    import autotune._tune as tune_module
    from autotune.whatif._sweep import sweep
    from autotune.whatif._targets import make_variants, parse_set

    seen: list[Any] = []
    real = tune_module.tune

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs["search"].guided)
        return real(*args, **kwargs)

    monkeypatch.setattr(tune_module, "tune", spy)
    vs = make_variants(Target.default(), [parse_set("l1.data_bytes=64K,1M")])
    sweep([tiny_graph], vs, trials_per_variant=12, log=tmp_path / "s.jsonl", workers=0, seed=0,
          warm=warm, allocate="equal", screen=screen)
    assert len(seen) >= 2
    assert all((g is not None and g.population == POPULATION) == expect for g in seen)
