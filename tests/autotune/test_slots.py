"""Several measurement slots in one process (``Measurer.slots_per_process``): the process's
CPU lock, ``waiting()``, the room a pool of such processes needs, the measurer's option.

No Ray here (the pool with a killed multi-slot process is tested in test_tune_ray.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autotune import DelayedMeasurer
from autotune.measure import _slots
from autotune.measure._slots import FairLock, waiting, working
from autotune.running._ray_pool import _room
from compiler.errors import GraphtuneError


@pytest.fixture
def multi_slot(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This process as a multi-slot worker (restored afterwards)."""
    monkeypatch.setattr(_slots, "_LOCK", None)
    _slots.enable()
    yield


def _run(threads: int, body: object) -> list[tuple[float, float]]:
    spans: list[tuple[float, float]] = []
    ready = threading.Barrier(threads)

    def slot() -> None:
        ready.wait()
        with working():
            t0 = time.monotonic()
            body()  # type: ignore[operator]
            spans.append((t0, time.monotonic()))

    ts = [threading.Thread(target=slot) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(10)
    return spans


def _overlapping(spans: list[tuple[float, float]]) -> int:
    return sum(1 for i, (a, b) in enumerate(spans) for c, d in spans[i + 1:] if a < d and c < b)


def test_slots_wait_together_and_work_one_at_a_time(multi_slot: None) -> None:
    inside: list[int] = []
    most = [0]
    all_waiting = threading.Barrier(4, timeout=10)

    def body() -> None:
        inside.append(1)  # the work: never two threads at once
        most[0] = max(most[0], len(inside))
        time.sleep(0.01)  # (holding the lock: a sleep here is work, not a wait)
        inside.pop()
        with waiting():
            all_waiting.wait()  # passes only once all four wait at once (else: broken)

    spans = _run(4, body)
    assert len(spans) == 4 and most[0] == 1 and not all_waiting.broken
    assert _overlapping(spans) == 6  # every pair's waits overlapped


def test_a_measurer_that_never_waits_measures_its_slots_in_turn(multi_slot: None) -> None:
    spans = _run(3, lambda: time.sleep(0.05))
    assert len(spans) == 3 and _overlapping(spans) == 0


def test_outside_a_multi_slot_process_nothing_is_locked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_slots, "_LOCK", None)
    together = threading.Barrier(3, timeout=10)
    spans = _run(3, together.wait)  # all three inside working() at once
    assert len(spans) == 3 and not together.broken
    with waiting():  # a no-op, also outside working()
        pass


def test_the_lock_goes_to_waiters_first_come_first_served() -> None:
    lock = FairLock()
    lock.acquire()
    order: list[int] = []

    def take(k: int) -> None:
        lock.acquire()
        order.append(k)
        lock.release()

    ts = []
    for k in range(4):
        ts.append(threading.Thread(target=take, args=(k,)))
        ts[-1].start()
        deadline = time.monotonic() + 5
        while lock.queued < k + 1 and time.monotonic() < deadline:
            time.sleep(0.001)
    # The holder lets go and asks again at once: it goes behind the four that waited.
    lock.release()
    lock.acquire()
    order.append(-1)
    lock.release()
    for t in ts:
        t.join(5)
    assert order == [0, 1, 2, 3, -1]
    with pytest.raises(RuntimeError):
        lock.release()  # not held


def test_room_for_processes_of_several_workers() -> None:
    assert _room([64], 64, 1) == 64 and _room([10], 64, 1) == 10
    assert _room([64], 64, 8) == 64
    assert _room([4], 64, 8) == 0  # a node of 4 cannot hold a process of 8
    assert _room([10], 10, 8) == 10  # 8 + 2 on one node
    assert _room([9], 10, 8) == 8 and _room([8, 1], 10, 8) == 8
    assert _room([8, 2], 10, 8) == 10
    assert _room([12, 12], 32, 8) == 16


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 40), min_size=1, max_size=5), st.integers(1, 80),
       st.integers(1, 16))
def test_room_is_what_a_placement_finds(fits: list[int], workers: int, per: int) -> None:
    """Invariant: ``_room`` is never more than the workers asked for, all of them exactly when
    a greedy placement (whole processes first, then the rest) places them all, and with one
    worker a process it is what the nodes hold in all."""
    room = _room(fits, workers, per)
    assert 0 <= room <= workers
    left = list(fits)
    placed = 0
    sizes = [per] * (workers // per) + ([workers % per] if workers % per else [])
    for size in sizes:
        k = next((i for i, c in enumerate(left) if c >= size), None)
        if k is None:
            break
        left[k] -= size
        placed += size
    assert (room == workers) == (placed == workers)
    if per == 1:
        assert room == min(sum(fits), workers)


def test_delayed_measurer_slots_option() -> None:
    assert DelayedMeasurer().slots_per_process == 1
    assert DelayedMeasurer(slots_per_process=8).slots_per_process == 8
    for bad in (0, -1, 2.0, True, "8"):
        with pytest.raises(GraphtuneError, match="slots_per_process"):
            DelayedMeasurer(slots_per_process=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [0, 2.5, "8", True])
def test_a_measurer_with_a_bad_slot_count_is_one_error_before_ray_starts(
        bad: object, monkeypatch: pytest.MonkeyPatch) -> None:
    from autotune.measure._measurer import SimMeasurer
    from autotune.running import _ray_pool
    from compiler.target import Target

    def refuse(*a: object) -> None:
        raise AssertionError("Ray was started")

    monkeypatch.setattr(_ray_pool, "start_ray", refuse)
    m = SimMeasurer()
    m.slots_per_process = bad  # type: ignore[assignment]
    with pytest.raises(GraphtuneError, match="slots_per_process must be an integer >= 1"):
        _ray_pool.RayPool({}, Target.default(), m, 4)


def test_a_measure_sent_before_load_waits_for_it(multi_slot: None, tiny_graph,  # type: ignore[no-untyped-def]
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # A threaded actor runs its calls in no set order: a measure call that starts before
    # the process's load() has run waits for it (review: it raised KeyError, a traceback).
    import contextlib

    from autotune.running import _ray_worker

    # an actor enters the search's GC setting for good: not this test process
    monkeypatch.setattr(_ray_worker, "search_gc", contextlib.nullcontext)
    from autotune.running._ray_worker import _Worker
    from compiler.auto import graph_schedule_level
    from compiler.target import Target

    target = Target.default()
    worker = _Worker(target, DelayedMeasurer(delay_s=0.0, slots_per_process=2), slots=2)
    s = graph_schedule_level(tiny_graph, target, 3).to_json()
    out: list = []
    th = threading.Thread(target=lambda: out.append(worker.measure("k", [s], None)))
    th.start()
    th.join(0.3)
    assert th.is_alive() and not out  # waiting for load(), not failing
    worker.load({"k": tiny_graph})
    th.join(30)
    assert out and out[0][1][0]["status"] == "ok"


def test_a_packed_measure_call_is_the_measure_call(tiny_graph,  # type: ignore[no-untyped-def]
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The pool sends a batch as one argument, the vectors as bytes (Ray's own
    serialisation of the five arguments, the vectors' arrays out of band, cost the actor
    ~0.5 ms more a call): the same measurements as the plain call, the picks decoded
    from their vectors as before."""
    import contextlib

    import numpy as np

    from autotune.running import _ray_worker
    from autotune.sampling._studies import candidate_id
    from compiler.target import Target
    from search_space import build_space

    monkeypatch.setattr(_ray_worker, "search_gc", contextlib.nullcontext)
    from autotune import SimMeasurer
    from autotune.running._ray_worker import _Worker

    target = Target.default()
    space = build_space(tiny_graph, target, tiny_graph.batch)
    picks = [space.sample(np.random.default_rng(k)) for k in range(4)]
    args = ("k", [s.to_json() for s in picks], None, [candidate_id(s) for s in picks],
            [(space.batch, space.project(s).vector) for s in picks])
    worker = _Worker(target, SimMeasurer())
    worker.load({"k": tiny_graph})
    host, plain, _ = worker.measure(*args)
    rebuilt = worker._breeder.rebuilt if worker._breeder else 0
    from autotune.running._ray_worker import pack_vectors

    got = worker.measure_packed((*args[:4], pack_vectors(args[4])))
    assert got[0] == host and len(got) == 3
    key = [(m["status"], m["latency_us"]) for m in plain]
    assert [(m["status"], m["latency_us"]) for m in got[1]] == key
    assert worker._breeder is not None and worker._breeder.rebuilt == rebuilt + 4
