"""What a Ray worker call costs the worker: a breeding round's cost model travels as a
reference the worker resolves once per model (Ray unpickles a call's arguments on every
call: 6-12 ms of CPU for a trained gpt1 model), not once per round. No Ray start here."""

from __future__ import annotations

from typing import Any

import pytest
import ray

from autotune.running._ray_pool import RayPool
from autotune.running._ray_worker import _Worker


class _Ref:
    def __init__(self, name: str) -> None:
        self.name = name

    def hex(self) -> str:
        return self.name


def test_the_pool_sends_the_model_as_a_reference_ray_leaves_alone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[tuple[Any, ...]] = []

    class Actor:
        class breed:  # noqa: N801 - Ray's method handle
            @staticmethod
            def remote(*args: Any) -> str:
                sent.append(args)
                return f"ref{len(sent)}"

    pool = object.__new__(RayPool)
    pool.workers, pool._per, pool._measuring = 2, 1, 2
    pool._actors = [Actor(), Actor()]
    pool._load, pool._breeds = [0, 0], [0, 0]
    pool._refs, pool._down, pool._bred_on, pool._breeders = {}, {}, set(), []
    pool._scorers, pool._bases = {}, {}
    monkeypatch.setattr(ray, "put", lambda obj: _Ref(f"put{id(obj)}"))
    request: Any = type("Req", (), {"seen_base": frozenset()})()
    scorer = object()
    pool.submit_breed(1, "t", request, scorer)
    pool.submit_breed(2, "t", request, scorer)
    (_, _, a), (_, _, b) = sent
    # a tuple holding the one stored copy (Ray resolves a top-level reference per call)
    assert isinstance(a, tuple) and isinstance(a[0], _Ref) and a[0] is b[0]


def test_the_worker_unpickles_each_model_once(monkeypatch: pytest.MonkeyPatch) -> None:
    worker = object.__new__(_Worker)
    worker._scorers = {}
    got: list[str] = []

    def get(ref: _Ref) -> str:
        got.append(ref.name)
        return f"model {ref.name}"

    monkeypatch.setattr(ray, "get", get)
    m1, m2 = _Ref("m1"), _Ref("m2")
    assert [worker._scorer(r) for r in (m1, m1, m2, m2, m1)] == [
        "model m1", "model m1", "model m2", "model m2", "model m1"]
    assert got == ["m1", "m2"]  # once each (the last two models are kept)
    worker._scorer(_Ref("m3"))
    assert len(worker._scorers) == 2 and "m1" not in worker._scorers
