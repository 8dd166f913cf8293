"""sim.measure: a batch in, one measurement per schedule out, failures as data."""

from __future__ import annotations

import dataclasses
import pickle
import time

import pytest

import sim._measure as measure_mod
from compiler.auto import graph_schedule_level
from compiler.graph import Graph
from compiler.schedule import GroupSpec
from compiler.target import Target
from logs import Result, Status
from sim import measure


def _variants(tiny: Graph, target: Target) -> list:
    ok = graph_schedule_level(tiny, target, 3)
    bad = dataclasses.replace(ok, groups=tuple(
        GroupSpec(g.name, g.ops, 3, g.chunks) if i == 0 else g for i, g in enumerate(ok.groups)))
    tight_ok = graph_schedule_level(tiny, target, 2)
    return [ok, bad, tight_ok]


def test_statuses_follow_the_log_vocabulary(tiny: Graph, target: Target) -> None:
    ok, bad, l2 = _variants(tiny, target)
    tight = target.replace(l1={"data_bytes": 2048})
    ms = measure(tiny, [ok, bad], target)
    assert [m.status for m in ms] == ["ok", "invalid_schedule"]
    assert ms[0].latency_us and ms[0].throughput_per_s and ms[0].lower_bound_us > 0
    assert ms[0].latency_over_bound is not None and ms[0].latency_over_bound >= 1
    assert ms[0].to_log_result().status is Status.OK
    assert isinstance(ms[1].to_log_result(), Result) and "split" in ms[1].error
    cap = measure(tiny, [l2], tight)[0]
    assert cap.status == "capacity" and "overflows" in cap.error
    assert all(m.status in {s.value for s in Status} for m in [*ms, cap])
    # results travel small: no timeline by default
    assert len(pickle.dumps(ms[0])) < 64 * 1024


def test_internal_errors_and_timeouts_are_data(tiny: Graph, target: Target,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    ok = graph_schedule_level(tiny, target, 3)
    real = measure_mod.run
    calls = {"n": 0}

    def flaky(graph, schedule, tgt, record=True):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 1:
            raise ZeroDivisionError("boom")
        if calls["n"] == 2:
            time.sleep(5)
        return real(graph, schedule, tgt, record=record)

    monkeypatch.setattr(measure_mod, "run", flaky)
    t0 = time.perf_counter()
    ms = measure(tiny, [ok, ok, ok], target, timeout_s=0.2)
    assert time.perf_counter() - t0 < 3
    assert [m.status for m in ms] == ["sim_error", "timeout", "ok"]
    assert "ZeroDivisionError: boom" in ms[0].error
    assert "longer than 0.2 s" in ms[1].error


def test_a_timeout_holds_off_the_main_thread(tiny: Graph, target: Target,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # A threaded Ray actor's slots measure on pool threads, where SIGALRM cannot reach:
    # the same slow simulation must still end as a timeout, and the thread carry on.
    import threading

    ok = graph_schedule_level(tiny, target, 3)
    real = measure_mod.run
    calls = {"n": 0}

    def slow_once(graph, schedule, tgt, record=True):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 1:
            t = time.monotonic()
            while time.monotonic() - t < 5:  # CPU-bound, as the simulator is
                pass
            raise RuntimeError("the deadline did not stop it")
        return real(graph, schedule, tgt, record=record)

    monkeypatch.setattr(measure_mod, "run", slow_once)
    out: list = []
    th = threading.Thread(target=lambda: out.append(measure(tiny, [ok, ok], target,
                                                            timeout_s=0.2)))
    th.start()
    th.join()
    assert [m.status for m in out[0]] == ["timeout", "ok"]
    assert "longer than 0.2 s" in out[0][0].error
