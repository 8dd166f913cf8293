"""A batch's picks go to the worker that bred them as their ids alone (``RayPool.slim``).

The worker measures the schedules it holds (``Breeder.take``), so their JSON (~17 KB
pickled a BERT-base s128 schedule) is neither pickled by the driver nor unpickled by the
worker. A worker that no longer holds one answers None and the pool sends the whole
batch again: nothing is measured from a missing JSON, nothing is lost.
"""

from __future__ import annotations

import contextlib
import pickle
from typing import Any

import pytest
import ray

from autotune.measure._measurer import SimMeasurer
from autotune.running import _ray_worker
from autotune.running._ray_pool import _InFlight, slim
from autotune.running._ray_worker import _Worker, pack_vectors
from autotune.sampling._breed import BreedRequest
from autotune.sampling._ranker import CostModelRanker
from compiler.graph import Graph
from compiler.target import Target
from tests.autotune.test_worker_errors import _Actor
from tests.autotune.test_worker_errors import _pool_with_actors as _pool


def test_slim_leaves_out_the_json_and_vector_of_the_held_picks_only() -> None:
    packed = ("k", [{"a": 1}, {"b": 2}, {"c": 3}], 5.0, ["a", "b", "c"], [(1, b"x", "<i2", (1,)),
                                                                         None, (1, b"z", "<i2", (1,))])
    got = slim(packed, [0, 2])
    assert got == ("k", [None, {"b": 2}, None], 5.0, ["a", "b", "c"], [None, None, None])
    assert packed[1] == [{"a": 1}, {"b": 2}, {"c": 3}]  # the whole one is kept as it was
    assert slim(packed, []) is None
    assert slim(("k", [{"a": 1}], None, ["a"], None), [0]) == ("k", [None], None, ["a"], None)


def _worker(graph: Graph, target: Target, monkeypatch: pytest.MonkeyPatch) -> _Worker:
    monkeypatch.setattr(_ray_worker, "search_gc", contextlib.nullcontext)
    worker = _Worker(target, SimMeasurer())
    worker.load({"k": graph})
    return worker


def _bred(worker: _Worker, graph: Graph, target: Target, seed: int) -> list[Any]:
    request = BreedRequest(batch=graph.batch, parents=(), seed=seed, proposals=6, eps=1,
                           seen=frozenset(), population=16, generations=1, random_share=0.25,
                           crossover=0.15)
    bred = worker.breed("k", request, CostModelRanker(graph, target, seed=0).snapshot())
    picks = pickle.loads(pickle.dumps(bred)).picks  # as the driver holds them
    assert len(picks) >= 3
    return list(picks)


def test_picks_sent_by_id_measure_as_their_json_does(tiny_graph: Graph, tune_target: Target,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    worker = _worker(tiny_graph, tune_target, monkeypatch)
    picks = _bred(worker, tiny_graph, tune_target, seed=1)
    full = ("k", [p.json for p in picks], None, [p.cid for p in picks],
            pack_vectors([(tiny_graph.batch, p.vector) for p in picks]))
    other = _worker(tiny_graph, tune_target, monkeypatch)  # holds none: parses / decodes
    _, plain, _ = other.measure_packed(full)
    assert plain is not None and all(m["status"] == "ok" for m in plain)
    sent = slim(full, list(range(1, len(picks))))  # the first one with its JSON
    assert sent is not None
    host, out, seconds = worker.measure_packed(sent)
    assert out is not None and seconds > 0
    key = [(m["status"], m["latency_us"], m["lower_bound_us"]) for m in plain]
    assert [(m["status"], m["latency_us"], m["lower_bound_us"]) for m in out] == key
    assert worker._breeder is not None and worker._breeder.taken == len(picks)
    # Taken once: sent by id again, nothing is measured, the pool is asked for the JSON.
    assert worker.measure_packed(sent) == (host, None, 0.0)


def test_a_worker_that_does_not_hold_a_pick_sent_by_id_measures_nothing(
        tiny_graph: Graph, tune_target: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    bred_here = _worker(tiny_graph, tune_target, monkeypatch)
    picks = _bred(bred_here, tiny_graph, tune_target, seed=2)
    restarted = _worker(tiny_graph, tune_target, monkeypatch)  # (a new process: holds none)
    full = ("k", [p.json for p in picks[:2]], None, [p.cid for p in picks[:2]], None)
    sent = slim(full, [1])
    assert sent is not None
    _, out, seconds = restarted.measure_packed(sent)
    assert out is None and seconds == 0.0
    assert restarted._breeder is not None and restarted._breeder.taken == 0


def test_the_pool_sends_its_picks_by_id_and_the_whole_batch_again_if_asked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pool = _pool()
    pool._bred_by = {"a": 1, "c": 1}
    pool._load = [1, 1]
    schedules = [{"s": "a"}, {"s": "b"}, {"s": "c"}, {"s": "d"}]
    pool.submit(7, "k", schedules, ["a", "b", "c", "d"])
    actor = pool._actors[1]
    assert isinstance(actor, _Actor) and pool._actors[0].sent == []  # type: ignore[attr-defined]
    # worker 1 bred a and c: they go as ids; b and d with their JSON
    assert actor.sent == [("k", [None, {"s": "b"}, None, {"s": "d"}], None,
                           ["a", "b", "c", "d"], None)]
    assert not pool._bred_by and pool._load == [1, 2]
    job = pool._refs["ref1"]
    assert job.packed == ("k", schedules, None, ["a", "b", "c", "d"], None)
    # The worker no longer held one: the same batch again to the same worker, whole.
    monkeypatch.setattr(ray, "get", lambda ref, *a, **k: ("host", None, 0.0))
    assert pool._collect("ref1") is None
    assert actor.sent[1] == job.packed and pool.resent == 1
    again = pool._refs["ref2"]
    assert isinstance(again, _InFlight) and (again.batch_id, again.unit, again.size) == (7, 1, 4)
    assert pool._load == [1, 2] and "ref1" not in pool._refs
    # Measured: its measurements come back as any batch's.
    monkeypatch.setattr(ray, "get", lambda ref, *a, **k: ("host", [], 0.1))
    fin = pool._collect("ref2")
    assert fin is not None and fin.batch_id == 7 and pool.resent == 1 and pool._load == [1, 1]


def test_a_batch_of_nobody_s_picks_goes_whole_and_others_picks_with_their_json() -> None:
    pool = _pool()
    pool._bred_by = {"a": 0, "b": 1, "c": 1}
    pool.submit(0, "k", [{"s": "a"}, {"s": "b"}, {"s": "c"}], ["a", "b", "c"])
    # the least loaded (0) bred one of them: it keeps the batch, a goes as its id
    assert pool._actors[0].sent == [("k", [None, {"s": "b"}, {"s": "c"}], None,  # type: ignore[attr-defined]
                                     ["a", "b", "c"], None)]
    pool = _pool()
    pool.submit(1, "k", [{"s": "a"}], ["a"])
    pool.submit(2, "k", [{"s": "b"}])
    sent = [p for a in pool._actors for p in a.sent]  # type: ignore[attr-defined]
    assert sorted(p[1][0]["s"] for p in sent) == ["a", "b"]
