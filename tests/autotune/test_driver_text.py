"""A bred pick's schedule comes back from its worker as its log text (``autotune.running._texts``).

The text is what ``json.dumps`` of the schedule's JSON writes (made from text kept per
interned group spec, transfer and step); the driver holds the pick as before (its lazy
schedule reads the same), and the record it writes has the same bytes.
"""

from __future__ import annotations

import json
import pickle
from typing import Any

import numpy as np
import pytest

from autotune.running import _texts
from autotune.running._texts import as_dicts, picks_as_text, schedule_text
from compiler.graph import Graph
from compiler.target import Target
from logs import Provenance, Record, Result, ScheduleText, Status, TargetKey, WorkloadInfo
from search_space import build_space
from tests.autotune.test_driver_slim import _bred, _worker


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def test_schedule_text_is_json_dumps_of_its_json(tiny_graph: Graph, tune_target: Target,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    space = build_space(tiny_graph, tune_target, tiny_graph.batch)
    schedules = [space.decode(v) for v in space.sample_vectors(np.random.default_rng(3), 60)]
    for rounds in range(2):  # cold, then from the memo
        for s in schedules:
            obj = s.to_json()
            t = schedule_text(s, obj)
            assert t.text == _dumps(obj), rounds
            assert t.with_source("tuner:s/1").text == _dumps({**obj, "source": "tuner:s/1"})
            assert t["batch"] == obj["batch"] and t == obj
    # a full memo starts again, the texts the same
    monkeypatch.setattr(_texts, "_MEMO_BYTES", 3000)
    _empty_memo(monkeypatch)
    for s in schedules[:20]:
        assert schedule_text(s, s.to_json()).text == _dumps(s.to_json())
        held = [t for _, t in _texts._memo.values()]
        assert _texts._memo_bytes == sum(map(len, held)) + _texts._ENTRY_BYTES * len(held)
        assert _texts._memo_bytes <= 3000
    # without the C encoder: json.dumps, the same texts
    monkeypatch.setattr(_texts, "_encode", None)
    _empty_memo(monkeypatch)
    for s in schedules[:10]:
        assert schedule_text(s, s.to_json()).text == _dumps(s.to_json())
    # a JSON whose lists do not match the schedule's: written from the JSON itself
    obj = schedules[0].to_json()
    obj["groups"] = obj["groups"][:1]
    assert schedule_text(schedules[0], obj).text == _dumps(obj)


def _empty_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_texts, "_memo", {})
    monkeypatch.setattr(_texts, "_memo_bytes", 0)


def test_the_memo_keeps_group_specs_and_steps_not_transfers(
        tiny_graph: Graph, tune_target: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    space = build_space(tiny_graph, tune_target, tiny_graph.batch)
    schedules = [space.decode(v) for v in space.sample_vectors(np.random.default_rng(4), 20)]
    assert any(s.transfers for s in schedules)
    _empty_memo(monkeypatch)
    for s in schedules:
        schedule_text(s, s.to_json())
    kept = {id(x) for s in schedules for k in ("groups", "order") for x in getattr(s, k)}
    assert set(_texts._memo) == kept  # each one's (a transfer is made anew by each decode)


def test_a_full_memo_holds_at_most_16_mb(monkeypatch: pytest.MonkeyPatch) -> None:
    """The worst case: items with short texts, each item kept alive only by the memo (a
    transfer the decoder dropped, a group spec of a value table it replaced), until the memo
    starts again. The old bound (2**17 entries) held ~26 MB of these, BERT-base's ~60 MB."""
    import tracemalloc

    _empty_memo(monkeypatch)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        top, n = 0, 0
        while n < 300_000 and (n < 1000 or len(_texts._memo) >= 1000):
            _texts._list_text([object() for _ in range(100)], list(range(n, n + 100)))
            n += 100
            top = max(top, tracemalloc.get_traced_memory()[0] - base)
    finally:
        tracemalloc.stop()
    assert n < 300_000  # it started again
    assert top <= 16 << 20, top


def test_a_workers_picks_travel_as_text_and_read_as_before(
        tiny_graph: Graph, tune_target: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    worker = _worker(tiny_graph, tune_target, monkeypatch)
    picks = _bred(worker, tiny_graph, tune_target, seed=4)  # (pickled, as the driver has them)
    assert worker._breeder is not None
    for p in picks:
        assert type(p.json) is ScheduleText
        held = worker._breeder._held_json[("k", p.cid)]
        assert p.json.text == _dumps(held) and p.json == held
        # the pick's schedule, parsed from the text when read (the driver rarely does)
        assert p.schedule.to_json() == held and p.schedule.groups
        rec = [Record(WorkloadInfo("k", "tiny", {}, tiny_graph.batch), TargetKey("c", "h"), s,
                      Result(Status.OK, latency_us=2.0), Provenance(time_unix_s=1.0))
               for s in (p.json.with_source("tuner:t/3"), {**held, "source": "tuner:t/3"})]
        assert rec[0].to_line_bytes() == rec[1].to_line_bytes()
    assert as_dicts([picks[0].json, None, {"a": 1}]) == [picks[0].json.parsed(), None, {"a": 1}]
    assert type(as_dicts([picks[0].json])[0]) is dict


def test_picks_without_json_stay_as_they_are(tiny_graph: Graph, tune_target: Target,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    worker = _worker(tiny_graph, tune_target, monkeypatch)
    bred = pickle.loads(pickle.dumps(_bred_raw(worker, tiny_graph, tune_target)))
    from dataclasses import replace

    plain = replace(bred, picks=tuple(replace(p, json=None) for p in bred.picks))
    assert all(p.json is None for p in picks_as_text(plain).picks)


def _bred_raw(worker: Any, graph: Graph, target: Target) -> Any:
    from autotune.sampling._breed import BreedRequest
    from autotune.sampling._ranker import CostModelRanker

    request = BreedRequest(batch=graph.batch, parents=(), seed=5, proposals=4, eps=1,
                           seen=frozenset(), population=16, generations=1, random_share=0.25,
                           crossover=0.15)
    return worker.breed("k", request, CostModelRanker(graph, target, seed=0).snapshot())


def test_the_texts_cpu_is_counted_apart(tiny_graph: Graph, tune_target: Target,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker's ``cpu()`` has the picks' texts (made after breeding, read back before
    measuring) as ``text``, outside ``breed`` and ``measure`` (bench/tune_workers.py
    prints it as part of the workers' other CPU)."""
    import time

    from autotune.running import _ray_worker

    worker = _worker(tiny_graph, tune_target, monkeypatch)
    real_text, real_dicts = _ray_worker.picks_as_text, _ray_worker.as_dicts

    def slow_text(bred: Any) -> Any:
        c0 = time.thread_time()
        while time.thread_time() - c0 < 0.05:
            pass
        return real_text(bred)

    def slow_dicts(schedules: Any) -> Any:
        c0 = time.thread_time()
        while time.thread_time() - c0 < 0.05:
            pass
        return real_dicts(schedules)

    monkeypatch.setattr(_ray_worker, "picks_as_text", slow_text)
    monkeypatch.setattr(_ray_worker, "as_dicts", slow_dicts)
    before = worker.cpu()
    bred = _bred_raw(worker, tiny_graph, tune_target)
    after_breed = worker.cpu()
    assert after_breed["text"] - before["text"] >= 0.05
    assert after_breed["breed"] - before["breed"] < after_breed["process"] - before["process"] - 0.05
    sent = [bred.picks[0].json]
    worker.measure_packed(("k", sent, None, [bred.picks[0].cid], None))
    after = worker.cpu()
    assert after["text"] - after_breed["text"] >= 0.05
    assert after["measure"] - after_breed["measure"] < 0.05
