"""``tune``'s option types and the old keywords they replace."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pytest

from autotune import MeasureOptions, RunOptions, SearchOptions, tune
from autotune._options import _LEGACY, from_legacy
from compiler.graph import Graph
from logs import read_records


def test_tune_takes_at_most_eight_parameters() -> None:
    assert len(inspect.signature(tune).parameters) <= 8


def test_options_are_frozen_with_defaults_of_the_usual_job() -> None:
    s, r, m = SearchOptions(), RunOptions(), MeasureOptions()
    assert (s.sampler, s.objective, s.seeds, r.batch_size, r.curve) == ("guided", "latency", True,
                                                                          None, True)
    assert m.measurer is None and r.workers is None
    for opt in (s, r, m):
        with pytest.raises(dataclasses.FrozenInstanceError):
            opt.seed = 3  # type: ignore[misc]


def test_every_old_keyword_lands_in_its_option() -> None:
    legacy = {"sampler": "tpe", "seed": 5, "objective": "throughput", "batch": 2,
              "early_stopping": 9, "guided": None, "ranker": None, "seeds": False,
              "workers": 0, "storage": "s.journal", "ray_address": "127.0.0.1:1",
              "worker_cpus": 0.5, "worker_resources": {"x": 1.0}, "batch_size": 7,
              "callbacks": (print,), "curve": False, "measurer": "delayed",
              "measurer_options": {"delay_s": 0.1}, "timeout_per_trial": 3.0}
    assert set(legacy) == set(_LEGACY)  # the test covers every old keyword
    with pytest.warns(DeprecationWarning, match="deprecated: pass search=SearchOptions"):
        s, r, m = from_legacy(None, None, None, legacy)
    assert s == SearchOptions("tpe", 5, "throughput", 2, 9, None, None, False)
    assert r == RunOptions(0, "s.journal", "127.0.0.1:1", 0.5, {"x": 1.0}, 7, (print,), False)
    assert m == MeasureOptions("delayed", {"delay_s": 0.1}, 3.0)


def test_an_old_keyword_overrides_its_field_only() -> None:
    with pytest.warns(DeprecationWarning):
        s, r, m = from_legacy(SearchOptions(seed=1, sampler="random"), RunOptions(workers=0), None,
                              {"seed": 2})
    assert (s.seed, s.sampler, r.workers, m) == (2, "random", 0, MeasureOptions())


def test_no_old_keyword_no_warning() -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert from_legacy(None, None, None, {}) == (SearchOptions(), RunOptions(), MeasureOptions())


def test_an_unknown_keyword_is_a_type_error(tiny_graph: Graph, tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'wokers'"):
        tune([tiny_graph], trials=4, log=tmp_path / "t.jsonl", wokers=0)
    assert not (tmp_path / "t.jsonl").exists()


def test_options_reach_the_job(tiny_graph: Graph, tmp_path: Path) -> None:
    log = tmp_path / "o.jsonl"
    res = tune([tiny_graph], trials=6, log=log,
               search=SearchOptions(sampler="random", seed=3, seeds=False),
               run=RunOptions(workers=0, curve=False),
               measure=MeasureOptions(measurer="sim"))
    recs = list(read_records(log))
    assert len(recs) == 6 and res.curve is None
    assert {r.prov.tuner for r in recs} == {"optuna-random"}  # no O0-O3 seeds, random sampler
