"""Which worker measures a batch of bred picks (``RayPool._holder``): the one that bred
them when it is exactly as loaded as the least loaded (it measures the objects it built
instead of decoding each pick again, ``Breeder.take``), else the least loaded. No Ray
start here: the pool's bookkeeping only. (A holder with one job more while the least
loaded is busy too was tried for issue 20: more picks measured where bred, 79-87 % against
58-70 %, but ResNet-50 b16's 2-worker tune ran 15-25 % slower in three of three pairs.)"""

from __future__ import annotations

import pytest

from autotune.running._ray_pool import RayPool


def _pool(load: list[int], breeds: list[int], bred_by: dict[str, int],
          down: tuple[int, ...] = ()) -> RayPool:
    pool = object.__new__(RayPool)
    pool.workers = len(load)
    pool._per, pool._measuring = 1, len(load)
    pool._load, pool._breeds = list(load), list(breeds)
    pool._bred_by = dict(bred_by)
    pool._down = {a: 0.0 for a in down}
    return pool


@pytest.mark.parametrize(("load", "breeds", "down", "want"), [
    ([1, 1], [0, 0], (), 1),  # as loaded: the holder
    ([1, 2], [0, 0], (), 0),  # one job more: worker 0 (it would wait for its next batch)
    ([0, 1], [0, 0], (), 0),  # worker 0 idle: it takes the batch
    ([1, 3], [0, 0], (), 0),  # two jobs more: worker 0
    ([1, 2], [0, 1], (), 0),  # the holder breeds (a round takes dozens of batches' time)
    ([1, 1], [0, 0], (1,), 0),  # the holder is down
])
def test_a_batch_goes_to_its_breeder_only_among_equals(
        load: list[int], breeds: list[int], down: tuple[int, ...], want: int) -> None:
    pool = _pool(load, breeds, {"a": 1, "b": 1}, down)
    # the picks the chosen worker bred go without their JSON (RayPool.slim)
    assert pool._holder(0, ["a", "b", "c"]) == (want, [0, 1] if want == 1 else [])
    assert not pool._bred_by  # each pick's holder is forgotten once it is sent


def test_the_least_loaded_keeps_a_batch_it_bred_a_pick_of_or_nobody_did() -> None:
    assert _pool([1, 2], [0, 0], {"a": 0, "b": 1, "c": 1})._holder(0, ["a", "b", "c"]) == (0, [0])
    assert _pool([1, 1], [0, 0], {})._holder(0, ["a", "b"]) == (0, [])
