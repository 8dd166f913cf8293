"""The driver breeds no round whose picks the budget leaves no room to measure (issue 20):
``autotune.running._cadence`` asks for none once what is queued and being bred covers the
trials left."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from autotune.running._cadence import Cadence, bred_ahead
from autotune.running._driver import Driver
from autotune.sampling._guided import GuidedOptions
from compiler.graph import Graph
from compiler.target import Target
from tests.autotune.test_tune_units import _TwoWorkerPool


@pytest.mark.parametrize(("queued", "breeding", "last", "left", "covered"), [
    (0, 0, 0, 1, False),  # nothing out: breed
    (4, 1, 29, 15, True),  # gpt1's last round: 4 queued and 29 being bred for 15 left
    (4, 1, 29, 34, False),  # one short: breed
    (5, 1, 29, 34, True),
    (0, 2, 8, 16, True),  # two rounds out
    (20, 0, 29, 21, False),  # queued alone short
])
def test_what_is_queued_and_being_bred_covers_the_trials_left(
        queued: int, breeding: int, last: int, left: int, covered: bool) -> None:
    """Whatever else the cadence would say (nothing out: breed at once), a covered budget
    gets no request; without a bound (``left`` None) the cadence decides alone."""
    bs = SimpleNamespace(queued=queued, breeding=breeding, last_proposals=last, news=100)
    assert (bred_ahead(bs) >= left) is covered
    assert Cadence(demand=64, out=2, fresh=4).may_breed(0, bs, 0, False, left) is not covered
    assert Cadence(demand=64, out=2, fresh=4).may_breed(0, bs, 0, False, None)


def test_no_round_is_asked_for_when_the_rounds_out_cover_the_budget(
        tiny_graph: Graph, tune_target: Target, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every breeding request of a two-worker tune is made while what is queued and being
    bred falls short of the trials left, and the tune still measures its whole budget."""
    from autotune import _tune as tune_mod
    from autotune import tune

    pools: list[_TwoWorkerPool] = []

    def two_workers(job: Any, target: Target, measurer: Any, *_: Any) -> _TwoWorkerPool:
        pools.append(_TwoWorkerPool({t.task.key: t.task.graph for t in job.tasks}, target,
                                    measurer))
        return pools[0]

    asked: list[tuple[int, int]] = []  # (proposals queued and out, trials left) per request
    breed = Driver._breed

    def watched(self: Driver, k: int, bs: Any) -> None:
        left = self.job.budget - self.job.total - self._pending()
        asked.append((bs.queued + bs.breeding * bs.last_proposals, left))
        breed(self, k, bs)

    monkeypatch.setattr(tune_mod, "_pool", two_workers)
    monkeypatch.setattr(Driver, "_breed", watched)
    res = tune([tiny_graph], trials=60, workers=2, log=tmp_path / "t.jsonl", seed=0,
               curve=False, batch_size=4, guided=GuidedOptions(breed_budget=float("inf")))
    assert res.measured == 60
    assert len(asked) >= 4
    assert all(out < left for out, left in asked), asked
