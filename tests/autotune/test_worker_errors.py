"""A worker that raises (Ray's ``RayTaskError``: an exception in the worker's own code, the
actor alive) fails its job, not the tuning job: a batch's candidates come back
``worker_lost`` with the message (the driver measures them again: test_worker_raised), a
breeding round is asked for again (bred in the driver after a few such), and the job goes
on. No Ray start here: the pool's collection of a job is fed
the error Ray's ``get`` raises."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

import pytest
import ray.exceptions

from autotune.running import _ray_pool
from autotune.running._pool import Finished, InProcessPool, raised
from autotune.running._ray_pool import RayPool, _InFlight


def _task_error(exc: BaseException) -> ray.exceptions.RayTaskError:
    """What ``ray.get`` raises for an actor call that raised ``exc``."""
    tb = f"Traceback (most recent call last):\n  File \"x.py\", line 1\n{type(exc).__name__}: {exc}"
    return ray.exceptions.RayTaskError("_Worker.measure_packed", tb, exc).as_instanceof_cause()


def _bare_pool(workers: int = 2) -> RayPool:
    """A RayPool's bookkeeping without Ray (only what collecting a job reads)."""
    pool = object.__new__(RayPool)
    pool.workers = workers
    pool._per, pool._measuring = 1, workers
    pool._actors = [object()] * workers
    pool._load, pool._breeds = [0] * workers, [0] * workers
    pool._bred_by, pool._bred_on = {}, set()
    pool._refs, pool._pings, pool._down, pool._reping = {}, {}, {}, {}
    pool._cancelled, pool.resent = 0, 0
    return pool


def _collect(pool: RayPool, monkeypatch: pytest.MonkeyPatch, job: _InFlight,
             exc: BaseException) -> Finished:
    def get(ref: Any, *a: Any, **k: Any) -> Any:
        raise exc

    monkeypatch.setattr(ray, "get", get)
    pool._refs["ref"] = job
    pool._load[job.unit] += 1
    pool._breeds[job.unit] += job.kind == "breed"
    return pool._collect("ref")


def test_a_batch_whose_worker_raised_comes_back_lost_with_the_message(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    pool = _bare_pool()
    with caplog.at_level(logging.WARNING, logger="autotune.ray"):
        fin = _collect(pool, monkeypatch, _InFlight(7, 3, 1, math.inf, unit=1),
                       _task_error(KeyError("no task 'abc'")))
    assert fin.batch_id == 7 and fin.kind == "measure"
    # not the candidates' fault (yet): to be measured again (the driver decides)
    assert [m.status for m in fin.measurements] == ["worker_lost"] * 3
    assert all("the worker raised KeyError" in m.error and "abc" in m.error
               for m in fin.measurements)
    assert fin.error.startswith("the worker raised KeyError")
    assert not pool._down and pool._load == [0, 0]  # the worker lives and is free again
    assert "batch 7" in caplog.text and "KeyError" in caplog.text


def test_a_breeding_round_whose_worker_raised_comes_back_empty_with_the_message(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pool = _bare_pool()
    fin = _collect(pool, monkeypatch, _InFlight(3, 0, 0, math.inf, "breed", unit=0),
                   _task_error(ValueError("bad parents")))
    assert fin.kind == "breed" and fin.bred is None
    assert fin.error == "breeding raised ValueError: bad parents"
    assert not pool._down and pool._breeds == [0, 0] and pool._load == [0, 0]


def test_a_lost_worker_is_still_lost_not_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    pool = _bare_pool()
    monkeypatch.setattr(RayPool, "_mark_down", lambda self, k: self._down.setdefault(k, 0.0))
    fin = _collect(pool, monkeypatch, _InFlight(1, 2, 0, math.inf, unit=0),
                   ray.exceptions.WorkerCrashedError())
    assert [m.status for m in fin.measurements] == ["worker_lost"] * 2 and not fin.error
    assert pool._down == {0: 0.0}


def test_raised_names_the_cause_and_its_last_line() -> None:
    assert raised(_task_error(RuntimeError("first\nsecond"))) == "RuntimeError: second"
    assert raised(OSError("disk")) == "OSError: disk"
    assert _ray_pool.raised is raised


def _breeding_pool(monkeypatch: pytest.MonkeyPatch, fails: Any, message: str) -> Any:
    """Install, as the tune's pool, one that measures in process but is "remote" with 2
    workers, whose breeding request ``n`` (counted from 1 in ``requests``) comes back
    with the worker's error ``message`` when ``fails(n)`` and is bred otherwise."""
    import autotune._tune as tune_mod

    class Breeding(InProcessPool):
        remote = True
        requests = 0

        def __init__(self, *a: Any) -> None:
            super().__init__(*a)
            self.workers, self.slots = 2, 4

        def submit_breed(self, batch_id: int, task_key: str, request: Any,
                         scorer: Any) -> None:
            Breeding.requests += 1
            if fails(Breeding.requests):
                self._done.append(Finished(batch_id, "", (), "breed", None, error=message))
            else:
                super().submit_breed(batch_id, task_key, request, scorer)

    monkeypatch.setattr(tune_mod, "_pool", lambda job, target, measurer, *_, **__: Breeding(
        {t.task.key: t.task.graph for t in job.tasks}, target, measurer, None))
    return Breeding


@pytest.mark.timeout(120)  # the driver before: asked for another round forever
@pytest.mark.parametrize("trials", [40, 300])
def test_a_tune_whose_breeding_always_raises_in_its_worker_goes_on(
        tiny_graph: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture, trials: int) -> None:
    """Every breeding request of a (fake) remote pool raises: the job measures its whole
    budget anyway, bred in the driver once the worker failed ``_DRY_LIMIT`` times in a row,
    and says so in the log, once: at 300 trials, before, the sampler's local rounds reset
    the count and the pool was asked again (36 requests, 9 "from now on")."""
    from autotune import DelayedMeasurer, tune
    from autotune.running._driver import _DRY_LIMIT

    pool = _breeding_pool(monkeypatch, lambda n: True, "breeding raised ValueError: bad parents")
    log = tmp_path / "t.jsonl"
    with caplog.at_level(logging.WARNING, logger="autotune.tune"):
        res = tune([tiny_graph], trials=trials, workers=2, log=str(log), seed=0,
                   measurer=DelayedMeasurer(delay_s=0.0), batch_size=4, curve=False)
    recs = [json.loads(line) for line in log.read_text().splitlines()]
    assert res.total == trials == len(recs)
    # then bred here, not asked of the worker again (the one out already with the third
    # failure, 2 workers: 2 requests out at once, comes back and fails too)
    assert _DRY_LIMIT <= pool.requests <= _DRY_LIMIT + 1
    assert "bad parents" in caplog.text
    assert caplog.text.count("bred here from now on") == 1


def test_breeding_that_fails_now_and_then_stays_on_the_workers(
        tiny_graph: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """Every other request raises: a request bred remotely resets the driver's count, so
    the rounds stay on the pool (never "bred here from now on")."""
    from autotune import DelayedMeasurer, tune
    from autotune.running._driver import _DRY_LIMIT

    pool = _breeding_pool(monkeypatch, lambda n: n % 2 == 1, "breeding raised ValueError: flaky")
    with caplog.at_level(logging.WARNING, logger="autotune.tune"):
        res = tune([tiny_graph], trials=120, workers=2, log=str(tmp_path / "t.jsonl"), seed=0,
                   measurer=DelayedMeasurer(delay_s=0.0), batch_size=4, curve=False)
    assert res.total == 120
    assert pool.requests > 2 * _DRY_LIMIT and "flaky" in caplog.text
    assert "bred here from now on" not in caplog.text


@pytest.mark.parametrize(("remote", "workers", "asked", "got"), [
    (False, 1, None, 4), (True, 2, None, 8), (True, 8, None, 8), (True, 9, None, 4),
    (True, 64, None, 4), (True, 2, 4, 4), (False, 1, 6, 6)])
def test_the_default_batch_is_larger_on_a_few_ray_workers(remote: bool, workers: int,
                                                          asked: int | None, got: int) -> None:
    """Batches of 8 on a pool of a few Ray workers (half the per-call costs per
    measurement), 4 in process and on many workers; an explicit size is kept."""
    from autotune._tune import default_batch

    pool = object.__new__(InProcessPool)
    pool.remote, pool.workers = remote, workers
    assert default_batch(asked, pool) == got


def test_a_two_worker_tune_sends_batches_of_eight(tiny_graph: Any, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import autotune._tune as tune_mod
    from autotune import DelayedMeasurer, tune

    sizes: list[int] = []

    class Two(InProcessPool):  # measured in process, scheduled as a 2-worker Ray pool
        remote = True

        def __init__(self, *a: Any) -> None:
            super().__init__(*a)
            self.workers, self.slots = 2, 4

        def submit(self, batch_id: int, task_key: str, schedules: Any, cids: Any = None,
                   vectors: Any = None) -> None:
            sizes.append(len(schedules))
            super().submit(batch_id, task_key, schedules, cids, vectors)

    def pool(job: Any, target: Any, measurer: Any, *_: Any, **__: Any) -> Two:
        return Two({t.task.key: t.task.graph for t in job.tasks}, target, measurer, None)

    monkeypatch.setattr(tune_mod, "_pool", pool)
    tune([tiny_graph], trials=40, workers=2, log=str(tmp_path / "t.jsonl"), seed=0,
         measurer=DelayedMeasurer(delay_s=0.0), curve=False)
    assert max(sizes) == 8 and sum(sizes) == 40


class _Actor:
    """A stand-in actor: its calls return fresh refs (what was sent is kept)."""

    def __init__(self) -> None:
        self.sent: list[Any] = []
        self.measure_packed = self

    def remote(self, packed: Any) -> str:
        self.sent.append(packed)
        return f"ref{len(self.sent)}"


def _pool_with_actors(workers: int = 2) -> RayPool:
    pool = _bare_pool(workers)
    pool._actors = [_Actor() for _ in range(workers)]
    pool._timeout_s = None
    return pool


_PACKED = ("task", [{"s": 1}, {"s": 2}], None, None, None)


def test_an_out_of_memory_worker_is_lost_with_the_reason_and_pinged(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Ray's memory monitor killed the worker (it restarts): the batch is lost, not the job."""
    pool = _bare_pool()
    monkeypatch.setattr(RayPool, "_mark_down", lambda self, k: self._down.setdefault(k, 0.0))
    with caplog.at_level(logging.WARNING, logger="autotune.ray"):
        fin = _collect(pool, monkeypatch, _InFlight(4, 2, 1, math.inf, unit=1),
                       ray.exceptions.OutOfMemoryError("node memory 95 % > 95 %"))
    assert fin is not None and [m.status for m in fin.measurements] == ["worker_lost"] * 2
    assert all("ran out of memory" in m.error for m in fin.measurements)
    assert fin.error.startswith("the worker ran out of memory")  # a second time: an error
    assert pool._down == {1: 0.0} and pool._load == [0, 0]
    assert caplog.text.count("\n") == 1 and "out of memory" in caplog.text  # one line


def test_a_cancelled_batch_is_sent_again_then_lost_after_a_few(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pool = _pool_with_actors()
    cancelled = ray.exceptions.TaskCancelledError()
    fin = _collect(pool, monkeypatch, _InFlight(9, 2, 0, math.inf, unit=0, packed=_PACKED),
                   cancelled)
    assert fin is None and not pool._down  # nothing measured, nothing recorded
    (ref, job), = pool._refs.items()
    assert job.batch_id == 9 and job.size == 2 and job.tries == 1
    assert [a.sent for a in pool._actors if a.sent] == [[_PACKED]]
    for _ in range(_ray_pool._AGAIN_LIMIT - 1):
        assert pool._collect(ref) is None
        (ref, job), = pool._refs.items()
    fin = pool._collect(ref)  # cancelled every time: lost (and may be proposed again)
    assert fin is not None and fin.batch_id == 9 and not pool._refs
    assert [m.status for m in fin.measurements] == ["worker_lost"] * 2
    assert "cancelled" in fin.measurements[0].error and not pool._down
    assert pool._load == [0, 0]


def test_any_other_ray_error_loses_the_batch_with_its_message(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pool = _bare_pool()
    monkeypatch.setattr(RayPool, "_mark_down", lambda self, k: self._down.setdefault(k, 0.0))
    fin = _collect(pool, monkeypatch, _InFlight(2, 1, 0, math.inf, unit=0),
                   ray.exceptions.ObjectStoreFullError("store full"))
    assert fin is not None and [m.status for m in fin.measurements] == ["worker_lost"]
    assert fin.measurements[0].error.startswith("Ray failed the call: ObjectStoreFullError")
    assert pool._down == {0: 0.0}  # pinged before it gets another batch


def test_breeding_that_ran_out_of_memory_is_dry_and_cancelled_breeding_is_asked_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pool = _bare_pool()
    monkeypatch.setattr(RayPool, "_mark_down", lambda self, k: self._down.setdefault(k, 0.0))
    fin = _collect(pool, monkeypatch, _InFlight(5, 0, 1, math.inf, "breed", unit=1),
                   ray.exceptions.OutOfMemoryError("oom"))
    assert fin is not None and fin.bred is None and "out of memory" in fin.error
    assert pool._down == {1: 0.0}
    fin = _collect(pool, monkeypatch, _InFlight(6, 0, 0, math.inf, "breed", unit=0),
                   ray.exceptions.TaskCancelledError())
    assert fin is not None and fin.bred is None and not fin.error  # not a dry round
    assert pool._breeds == [0, 0] and pool._load == [0, 0]


def test_breeding_cancelled_again_and_again_fails_after_a_few(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: a cancelled breeding call was asked for again without a limit."""
    pool = _bare_pool()
    for i in range(_ray_pool._AGAIN_LIMIT):
        fin = _collect(pool, monkeypatch, _InFlight(i, 0, 0, math.inf, "breed", unit=0),
                       ray.exceptions.TaskCancelledError())
        assert fin is not None and not fin.error  # asked again
    fin = _collect(pool, monkeypatch, _InFlight(9, 0, 0, math.inf, "breed", unit=0),
                   ray.exceptions.TaskCancelledError())
    assert fin is not None and "cancelled" in fin.error  # a failed request (the driver counts)


def test_wait_hands_back_a_cancelled_batch_once_measured_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the pool's ``wait``: the driver never sees the cancelled call."""
    pool = _pool_with_actors()
    pool._restart_grace_s = math.inf
    pool._send(3, _PACKED, 0)
    calls = []

    def get(ref: Any, *a: Any, **k: Any) -> Any:
        calls.append(ref)
        if len(calls) == 1:
            raise ray.exceptions.TaskCancelledError()
        return "h", [], 0.5

    monkeypatch.setattr(ray, "get", get)
    monkeypatch.setattr(ray, "wait", lambda refs, **k: (list(refs)[:1], list(refs)[1:]))
    assert pool.wait(0.0) == []
    done = pool.wait(0.0)
    assert [(f.batch_id, f.host) for f in done] == [(3, "h")] and not pool._refs
