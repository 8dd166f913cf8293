"""Per-trial costs of the driver that grew with the study are gone (issue 20 item 6).

* The driver looked for enqueued (WAITING) trials with a scan of the whole study on
  every ask, several times per trial; it now looks until a private study has none left.
* The guided sampler took its parents with ``heapq.nlargest`` over every measured
  candidate per breeding request; it now keeps the best as they arrive, in the same
  order (a property test against ``heapq.nlargest``).
"""

from __future__ import annotations

import heapq
from pathlib import Path
from typing import Any

import numpy as np
import optuna
from hypothesis import given, settings
from hypothesis import strategies as st
from optuna.trial import TrialState

from autotune import GuidedOptions, tune
from autotune.sampling._guided import GuidedSampler
from compiler.graph import Graph
from tests.autotune.test_tune_units import FakeRanker, tiny_space  # noqa: F401 - a fixture

SMALL = GuidedOptions(population=32, generations=1, proposals=8, parents=4, retrain_every=8)


def test_the_driver_stops_scanning_for_enqueued_trials(tiny_graph: Graph, tmp_path: Path,
                                                       monkeypatch: Any) -> None:
    scans = {"waiting": 0}
    real = optuna.storages.JournalStorage.get_all_trials

    def counted(self: Any, study_id: int, deepcopy: bool = True, states: Any = None) -> Any:
        if states is not None and tuple(states) == (TrialState.WAITING,):
            scans["waiting"] += 1
        return real(self, study_id, deepcopy=deepcopy, states=states)

    monkeypatch.setattr(optuna.storages.JournalStorage, "get_all_trials", counted)
    res = tune([tiny_graph], trials=40, workers=0, log=tmp_path / "t.jsonl", seed=3,
               guided=SMALL, curve=False)
    (task,) = res.tasks
    assert res.total == 40
    # the seeds (enqueued before the loop) were still measured first
    assert {"O0", "O1", "O2", "O3"} <= set(task.baselines)
    seeds = len(task.baselines)
    # each seed is popped by one study.ask() (one scan) and looked for up to 3 times before;
    # then one scan finds none, and none follows: not ~3 per trial as before
    assert scans["waiting"] <= 4 * seeds + 4, scans  # 54 for these 40 trials before


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=0, max_size=40), st.integers(1, 8))
def test_the_best_parents_are_heapq_nlargests(tiny_space: Any, ys: list[int],  # noqa: F811
                                               k: int) -> None:
    """``_best(k)`` as ``heapq.nlargest`` over all measured candidates (ties: the first
    measured first), for any arrival order and any k (within and past ``parents``)."""
    sampler = GuidedSampler(space=tiny_space, ranker=FakeRanker(tiny_space),
                            options=GuidedOptions(parents=4))
    for i, y in enumerate(ys):  # few distinct values: many ties
        cid = f"c{i}"
        sampler._vectors[cid] = np.array([i])
        sampler._scores[cid] = float(y)
        sampler._keep_top(cid, float(y))
    want = heapq.nlargest(k, sampler._scores, key=sampler._scores.__getitem__)
    got = [int(v[0]) for v in sampler._best(k)]
    assert got == [int(c[1:]) for c in want]


def test_a_record_holds_the_schedule_json_sent_to_the_pool_with_its_source(
        tiny_graph: Graph, tmp_path: Path, monkeypatch: Any) -> None:
    """The driver writes each schedule's JSON once (when it goes to the pool): the record's
    schedule is that JSON with ``source`` set, the very JSON ``replace(schedule,
    source=...).to_json()`` wrote before, for seeds and tuned candidates alike."""
    from dataclasses import replace

    from autotune.running._driver import Driver, is_seed_label

    checked = {"tuned": 0, "seed": 0, "json": 0}
    real = Driver._record

    def spied(self: Any, c: Any, m: Any, host: str) -> None:
        written: list[Any] = []
        write = self.writer.write
        self.writer.write = lambda rec: (written.append(rec), write(rec))[1]
        try:
            real(self, c, m, host)
        finally:
            self.writer.write = write
        study = self.job.tasks[c.task].study.study_name if c.trial is not None else ""
        if is_seed_label(c.tuner):
            want = c.schedule.to_json()
            checked["seed"] += 1
        else:
            want = replace(c.schedule, source=f"tuner:{study}/{c.trial.number}").to_json()
            checked["tuned"] += 1
        checked["json"] += c.json is not None
        assert dict(written[0].schedule) == want

    monkeypatch.setattr(Driver, "_record", spied)
    res = tune([tiny_graph], trials=40, log=tmp_path / "t.jsonl", seed=0, curve=False,
               guided=SMALL)
    assert res.measured == 40
    assert checked["tuned"] and checked["seed"] and checked["json"] == 40
