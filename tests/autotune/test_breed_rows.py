"""Feature rows kept over rounds (``_breed._ROWS``): a candidate featurised by an earlier
round of the same space gets the row computed then, which is the row computed afresh (a
row is a function of its schedule alone); only for a scorer whose rows are
``cost_model.features`` of the space's graph and target; bounded."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from autotune.sampling import _breed
from autotune.sampling._breed import RankerScorer, breed
from autotune.sampling._guided import GuidedOptions, GuidedSampler
from autotune.sampling._ranker import CostModelRanker, EncodingXGB
from compiler.graph import Graph
from compiler.target import Target
from search_space import build_space


class _Counting:
    """A scorer that forwards to ``inner`` and counts the rows it was asked for."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.label, self.asked = inner, inner.label, 0

    def features(self, space: Any, schedules: Any) -> np.ndarray:
        self.asked += len(schedules)
        return self.inner.features(space, schedules)

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.inner.predict(x)


def test_a_row_is_its_schedule_s_alone(tiny_graph: Graph, tune_target: Target) -> None:
    """The premise: ``cost_model.features`` of a list is each schedule's row alone."""
    import cost_model

    space = build_space(tiny_graph, tune_target, tiny_graph.batch)
    rng = np.random.default_rng(0)
    schedules = [space.sample(rng) for _ in range(12)]
    together = np.asarray(cost_model.features(space.graph, schedules, space.target))
    for k, s in enumerate(schedules):
        alone = np.asarray(cost_model.features(space.graph, [s], space.target))
        assert alone[0].tobytes() == together[k].tobytes()


def test_later_rounds_reuse_rows_and_pick_alike(tiny_graph: Graph, tune_target: Target) -> None:
    """Four rounds (the later ones bred from the first's picks, one a polish round) pick
    the same candidates with the same keys and features with rows kept as with none kept,
    and the kept ones ask the featuriser for fewer rows."""
    def rounds(keep: bool) -> tuple[list[Any], int]:
        space = build_space(tiny_graph, tune_target, tiny_graph.batch)
        ranker = CostModelRanker(tiny_graph, tune_target, seed=0)
        sampler = GuidedSampler(space=space, ranker=ranker, seed=1,
                                options=GuidedOptions(population=24, generations=2, proposals=6))
        first = sampler.breed_request()
        out, asked, parents = [], 0, ()
        for r in range(4):
            req = first if r == 0 else replace(first, seed=first.seed + r, parents=parents,
                                               polish=8 if r == 3 else 0)
            if not keep:
                _breed._ROWS.pop(space, None)
            counting = _Counting(ranker.snapshot())
            bred = breed(space, counting, req)
            asked += counting.asked
            out.append([(p.cid, p.key, p.features.tobytes()) for p in bred.picks])
            if r == 0:
                parents = tuple(p.vector for p in bred.picks[:3])
        return out, asked

    with pytest.MonkeyPatch.context() as mp:  # the counting wrapper stands for the snapshot
        mp.setattr(_breed, "_rows_by_schedule", lambda sp, sc: True)
        kept, asked_kept = rounds(True)
        fresh, asked_fresh = rounds(False)
    assert kept == fresh
    assert asked_kept < asked_fresh


def test_only_rows_of_the_space_s_graph_are_kept(tiny_graph: Graph, tune_target: Target) -> None:
    """The pool's snapshot and the in-process ranker of the space's graph keep rows; the
    encoding model (a row is the candidate's vector: not its id's) and a ranker of
    another graph object do not."""
    space = build_space(tiny_graph, tune_target, tiny_graph.batch)
    ranker = CostModelRanker(tiny_graph, tune_target, seed=0)
    assert _breed._rows_by_schedule(space, ranker.snapshot())
    assert _breed._rows_by_schedule(space, RankerScorer(ranker))
    enc = EncodingXGB(space)
    assert not _breed._rows_by_schedule(space, enc.snapshot())
    assert not _breed._rows_by_schedule(space, RankerScorer(enc))
    import copy

    other = CostModelRanker(copy.deepcopy(tiny_graph), tune_target, seed=0)
    assert not _breed._rows_by_schedule(space, RankerScorer(other))


def test_the_kept_rows_are_bounded_and_read_only(tiny_graph: Graph, tune_target: Target,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_breed, "_MAX_ROWS", 10)
    space = build_space(tiny_graph, tune_target, tiny_graph.batch)
    ranker = CostModelRanker(tiny_graph, tune_target, seed=0)
    sampler = GuidedSampler(space=space, ranker=ranker, seed=1,
                            options=GuidedOptions(population=24, generations=2, proposals=6))
    for _ in range(3):
        bred = breed(space, ranker.snapshot(), sampler.breed_request())
        sampler.bred(bred)
        assert len(_breed._kept_rows(space)) <= 10 + 24 * 3 + 24
    rows = _breed._ROWS[space]
    assert rows and all(not r.flags.writeable for r in rows.values())
