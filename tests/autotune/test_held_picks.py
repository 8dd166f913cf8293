"""A pick measured where it was bred is measured as the object its breeding built; one
measured on another worker, as the schedule its vector decodes to there.

``Breeder.take`` hands a pool the schedules it picked (by task and candidate id), so a
worker measures the object whose pre-check already planned its memory instead of a copy
parsed from JSON; the measurement must be the same, and a pick whose JSON differs from
what was sent must not stand for it.
"""

from __future__ import annotations

import pickle
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from autotune import GuidedOptions, RunOptions, SearchOptions, tune
from autotune.measure._measurer import SimMeasurer, measure_json
from autotune.running._pool import InProcessPool
from autotune.sampling._breed import HELD_PICKS, Breeder, BreedRequest
from autotune.sampling._ranker import CostModelRanker
from compiler.graph import Graph
from compiler.schedule import GraphSchedule
from compiler.target import Target


def _round(graph: Graph, target: Target, seed: int = 0, proposals: int = 6) -> BreedRequest:
    return BreedRequest(batch=graph.batch, parents=(), seed=seed, proposals=proposals, eps=1,
                        seen=frozenset(), population=16, generations=1, random_share=0.25,
                        crossover=0.15)


def test_a_held_pick_measures_as_its_json_does(tiny_graph: Graph, tune_target: Target) -> None:
    breeder = Breeder({"k": tiny_graph}, tune_target)
    scorer = CostModelRanker(tiny_graph, tune_target, seed=0).snapshot()
    bred = breeder("k", _round(tiny_graph, tune_target), scorer)
    assert len(bred.picks) >= 3
    # The driver gets the picks pickled; what it sends back is their JSON.
    picks = pickle.loads(pickle.dumps(bred)).picks
    cids = [p.cid for p in picks]
    sent = [p.schedule.to_json() for p in picks]
    plain = measure_json(SimMeasurer(), tiny_graph, sent, tune_target, None)[1]
    held = breeder.take("k", cids, sent)
    assert all(s is not None for s in held) and breeder.taken == len(picks)
    assert [s is p.schedule for s, p in zip(held, bred.picks)] == [True] * len(picks)
    again = measure_json(SimMeasurer(), tiny_graph, sent, tune_target, None, held)[1]
    assert again == [dict(m, seconds=a["seconds"]) for m, a in zip(plain, again)]
    assert all(m["status"] == "ok" for m in plain)
    # Taken once: a second batch of the same ids parses its JSON.
    assert breeder.take("k", cids, sent) == [None] * len(picks)


def test_a_pick_stands_only_for_its_own_json_and_task(tiny_graph: Graph,
                                                      tune_target: Target) -> None:
    breeder = Breeder({"k": tiny_graph}, tune_target)
    scorer = CostModelRanker(tiny_graph, tune_target, seed=0).snapshot()
    picks = breeder("k", _round(tiny_graph, tune_target, seed=3), scorer).picks
    a, b = picks[0], picks[1]
    # Another task's batch with the same id, and b's id sent with a's JSON: not held.
    assert breeder.take("other", [a.cid], [a.schedule.to_json()]) == [None]
    assert breeder.take("k", [b.cid], [a.schedule.to_json()]) == [None]
    # A JSON that differs in anything (here its source label) is parsed, not replaced.
    relabelled = replace(a.schedule, source="tuner:x/1").to_json()
    assert breeder.take("k", [a.cid], [relabelled]) == [None]
    assert breeder.take("k", None, [a.schedule.to_json()]) == [None]
    assert breeder.taken == 0


def test_a_pick_bred_elsewhere_is_decoded_from_its_vector_and_measures_the_same(
        tiny_graph: Graph, tune_target: Target) -> None:
    """A worker that did not breed a pick decodes its space vector again (not its JSON):
    the same schedule, so the same measurement; a vector that writes another JSON, or
    that the space cannot read, leaves the JSON to be parsed."""
    import numpy as np

    bred = Breeder({"k": tiny_graph}, tune_target)("k", _round(tiny_graph, tune_target, seed=4),
                                                   CostModelRanker(tiny_graph, tune_target,
                                                                   seed=0).snapshot())
    picks = pickle.loads(pickle.dumps(bred)).picks  # as the driver holds them
    assert len(picks) >= 3
    cids = [p.cid for p in picks]
    sent = [p.schedule.to_json() for p in picks]
    vectors = [(tiny_graph.batch, p.vector) for p in picks]
    other = Breeder({"k": tiny_graph}, tune_target)  # another worker: holds none of them
    got = other.take("k", cids, sent, vectors)
    assert all(s is not None for s in got) and other.rebuilt == len(picks) and other.taken == 0
    assert [s.to_json() for s in got if s is not None] == sent
    plain = measure_json(SimMeasurer(), tiny_graph, sent, tune_target, None)[1]
    again = measure_json(SimMeasurer(), tiny_graph, sent, tune_target, None, got)[1]
    assert again == [dict(m, seconds=a["seconds"]) for m, a in zip(plain, again)]
    # a's vector sent with b's JSON; a vector of the wrong length; none: all parsed
    bad = [(tiny_graph.batch, picks[0].vector), (tiny_graph.batch, np.zeros(3, np.int16)), None]
    fresh = Breeder({"k": tiny_graph}, tune_target)
    assert fresh.take("k", cids[1:3] + cids[:1], [sent[1], sent[2], sent[0]], bad) == [None] * 3
    assert fresh.rebuilt == 0


def test_a_warm_up_builds_the_space_and_measures_one_sample_that_fits(
        tiny_graph: Graph, tune_target: Target) -> None:
    breeder = Breeder({"k": tiny_graph}, tune_target)
    seen: list[GraphSchedule] = []
    breeder.warm("k", tiny_graph.batch, seen.append)
    assert ("k", tiny_graph.batch) in breeder._spaces and len(seen) == 1
    assert breeder.space("k", tiny_graph.batch).precheck(seen[0]).ok
    breeder.warm("k", tiny_graph.batch, None)  # no measurer to warm: nothing measured
    assert len(seen) == 1


def test_held_picks_are_bounded(tiny_graph: Graph, tune_target: Target) -> None:
    breeder = Breeder({"k": tiny_graph}, tune_target)
    scorer = CostModelRanker(tiny_graph, tune_target, seed=0).snapshot()
    first = breeder("k", _round(tiny_graph, tune_target, seed=1), scorer).picks[0]
    fake = GraphSchedule.from_json(first.schedule.to_json())
    for n in range(HELD_PICKS):
        breeder._held[("k", f"filler{n}")] = fake
    breeder("k", _round(tiny_graph, tune_target, seed=2, proposals=2), scorer)
    assert len(breeder._held) == HELD_PICKS
    assert breeder.take("k", [first.cid], [first.schedule.to_json()]) == [None]


class _Counting(InProcessPool):
    """The in-process pool, counting the schedules it measures."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.sent = 0

    def submit(self, batch_id: int, task_key: str, schedules: Any, cids: Any = None,
               vectors: Any = None) -> None:
        self.sent += len(schedules)
        super().submit(batch_id, task_key, schedules, cids, vectors)


def test_a_tune_measures_its_bred_picks_as_bred_and_logs_the_same(
        tiny_onnx: Path, tmp_path: Path, monkeypatch: Any) -> None:
    """Same seed, same log, whether bred picks are measured as bred or parsed again."""
    import json

    from autotune import _tune as tune_mod
    from autotune.sampling import _breed

    pools: list[_Counting] = []

    def make(job: Any, target: Target, measurer: Any, workers: int, *rest: Any,
             **kw: Any) -> _Counting:
        assert workers == 0
        pools.append(_Counting({t.task.key: t.task.graph for t in job.tasks}, target, measurer))
        return pools[-1]

    monkeypatch.setattr(tune_mod, "_pool", make)

    def run(log: Path) -> list[tuple[Any, ...]]:
        tune([str(tiny_onnx)], trials=40, log=log,
             search=SearchOptions(seed=0, guided=GuidedOptions(retrain_every=8)),
             run=RunOptions(workers=0, curve=False))
        rows = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        return [(r["schedule"]["groups"], r["schedule"]["order"], r["result"]["latency_us"],
                 r["prov"]["trial"]) for r in rows]

    with_held = run(tmp_path / "held.jsonl")
    taken = pools[-1]._breeder.taken
    assert pools[-1].sent == 40 and 0 < taken < 40  # bred picks as bred; seeds parsed
    monkeypatch.setattr(_breed.Breeder, "take",
                        lambda self, key, cids, schedules, vectors=None:
                        [None] * len(schedules))
    parsed = run(tmp_path / "parsed.jsonl")
    assert with_held == parsed and len(parsed) == 40


def test_a_pick_travels_as_its_json_and_is_taken_without_writing_it_again(
        tiny_graph: Graph, tune_target: Target, monkeypatch: Any) -> None:
    """A bred pick pickles as its JSON, not its objects: the driver's copy is the same
    schedule (equal, same id), parsed only when read; the worker takes the held pick by
    comparing the JSON it was sent with the one it bred, not by writing its JSON again."""
    from autotune.sampling._studies import candidate_id
    from compiler.codes import LazySchedule

    breeder = Breeder({"k": tiny_graph}, tune_target)
    scorer = CostModelRanker(tiny_graph, tune_target, seed=0).snapshot()
    bred = breeder("k", _round(tiny_graph, tune_target, seed=5), scorer)
    assert len(bred.picks) >= 3
    assert all(p.json == p.schedule.to_json() for p in bred.picks)
    picks = pickle.loads(pickle.dumps(bred)).picks
    for here, there in zip(bred.picks, picks):
        assert there.json == here.json and there.cid == here.cid
        s = there.schedule
        assert isinstance(s, LazySchedule) and not s.is_built()
        assert candidate_id(s) == here.cid and not s.is_built()  # the id from the JSON's parse
        assert s == here.schedule and s.to_json() == here.json
        assert (there.params, there.ranked_by, there.key, there.explore) == (
            here.params, here.ranked_by, here.key, here.explore)
        assert (there.vector == here.vector).all() and (there.features == here.features).all()
    sent = pickle.loads(pickle.dumps([p.json for p in picks]))  # the driver's batch
    monkeypatch.setattr(GraphSchedule, "to_json", lambda self: pytest.fail("JSON written"))
    held = breeder.take("k", [p.cid for p in picks], sent)
    assert [s is p.schedule for s, p in zip(held, bred.picks)] == [True] * len(picks)


def test_a_pick_made_without_a_breeder_travels_as_its_objects(
        tiny_graph: Graph, tune_target: Target) -> None:
    """``breed`` alone (a round bred in the driver) leaves no JSON: the pick pickles whole."""
    from autotune.sampling._breed import breed

    scorer = CostModelRanker(tiny_graph, tune_target, seed=0).snapshot()
    space = Breeder({"k": tiny_graph}, tune_target).space("k", tiny_graph.batch)
    bred = breed(space, scorer, _round(tiny_graph, tune_target, seed=6))
    assert bred.picks and all(p.json is None for p in bred.picks)
    again = pickle.loads(pickle.dumps(bred)).picks
    assert [p.schedule for p in again] == [p.schedule for p in bred.picks]
    assert all(p.json is None for p in again)


def test_a_pick_past_the_held_json_bound_is_taken_by_writing_its_json(
        tiny_graph: Graph, tune_target: Target, monkeypatch: Any) -> None:
    """Only the last ``HELD_JSON`` picks keep the JSON they were sent as (memory); an older
    held pick is still taken when its own JSON equals what was sent, and not otherwise."""
    from autotune.sampling import _breed

    monkeypatch.setattr(_breed, "HELD_JSON", 1)
    breeder = Breeder({"k": tiny_graph}, tune_target)
    scorer = CostModelRanker(tiny_graph, tune_target, seed=0).snapshot()
    picks = breeder("k", _round(tiny_graph, tune_target, seed=7), scorer).picks
    assert len(picks) >= 3 and len(breeder._held_json) == 1
    old, older = picks[0], picks[1]
    relabelled = dict(older.json or {}, source="tuner:x/1")
    assert breeder.take("k", [older.cid], [relabelled]) == [None]
    sent = pickle.loads(pickle.dumps([p.json for p in picks[2:]] + [old.json]))
    held = breeder.take("k", [p.cid for p in picks[2:]] + [old.cid], sent)
    assert held == [p.schedule for p in picks[2:]] + [old.schedule]
    assert all(s is not None for s in held) and breeder.taken == len(picks) - 1
