"""When the driver asks a task's sampler for another breeding request: the cadence.

A request is asked for once it can learn from the last one: once half of what the last
request proposed was measured since it was made (so a share is never bred from the
parents and model of the one before), and a task's first shares once its seeds are
measured (around them: cheaper, and better, than a round from random samples).
Without measurements out, at once. Two refinements for many workers (issue 20, 64
workers with a 200 ms measurer):

* measurements back beyond a request's worth are owed further requests, sent as the
  requests out allow: the sampler's news restart with each request, so a wait that
  returned dozens of measurements made one request (104 batches in flight of 128;
  owed ones kept 128);
* while a task's seeds are measured and what it has out is under ``1 / BLIND_SHARE`` of
  what the workers hold, the workers the seeds leave idle measure blind rounds, bred from
  random samples (no parents yet: the cost model's prior ranks them), rather than wait
  (64 workers: two rounds beside the seeds; 8: one; 2: none, the seeds' batch fills a
  quarter); the first rounds around the measured seeds then go out at once.
"""

from __future__ import annotations

from typing import Any

__all__ = ["BLIND_SHARE", "Cadence"]

BLIND_SHARE = 4
"""Blind rounds go out while a task's candidates out are under 1 / BLIND_SHARE of what the
workers hold (at 64 workers the seeds' one batch left 63 idle for a measurement and the
first round's breeding: ~1 s of a 6 s bench)."""


class Cadence:
    """The breeding cadence of a driver's tasks (see the module doc).

    Args:
        demand: Candidates the pool holds at once per task.
        out: Breeding requests out at once per task.
        fresh: Measurements between two requests while no request said how many it proposed.
    """

    def __init__(self, demand: int, out: int, fresh: int) -> None:
        self.demand, self.out, self.fresh = demand, out, fresh
        # Tasks that bred before anything of theirs was measured: True until the requests
        # around their first measurements are out.
        self._blind: dict[int, bool] = {}
        self._owed: dict[int, int] = {}  # task -> measurements back not yet bred on

    def may_breed(self, k: int, bs: Any, pending: int, measured: bool) -> bool:
        """Whether task ``k``'s sampler ``bs`` is asked for a request now (True: it is).

        ``pending``: the task's candidates out; ``measured``: whether any of it was.
        Half of what the last request proposed, not of the demand's share: a round
        proposes at most ``population`` however much the workers hold (64 workers hold
        512; 8 shares of 12 were asked for once 32 measurements came back each, 12 new
        candidates per 32 measured, and the workers starved), and under ``breed_budget``
        a request proposes more than the demand's share.
        """
        if not pending:
            return True
        if not measured:
            return self._blind_round(k, bs, pending)
        if self._blind.get(k):
            # Its first measurements are back while blind rounds are measured: breed around
            # them at once, up to the requests out, as with no measurements out.
            if bs.breeding + 1 >= self.out:
                self._blind[k] = False
            return True
        asked = getattr(bs, "last_proposals", 0)
        fresh = max(1, asked // 2) if asked else self.fresh
        have = bs.news + self._owed.get(k, 0)
        if have < fresh:
            return False
        self._owed[k] = min(have - fresh, self.out * fresh)  # owed at most the requests out
        return True

    def _blind_round(self, k: int, bs: Any, pending: int) -> bool:
        """A blind round of task ``k`` while what it has out, queued and being bred is
        under 1 / :data:`BLIND_SHARE` of the demand."""
        out = pending + bs.queued + bs.breeding * getattr(bs, "last_proposals", 0)
        if out * BLIND_SHARE >= self.demand:
            return False
        self._blind[k] = True
        return True
