"""When the driver asks a task's sampler for another breeding request: the cadence.

A request is asked for once it can learn from the last one: once half of what the last
request proposed was measured since it was made (so a share is bred from new
measurements, but for owed requests, below), and a task's first shares once its seeds
are measured (around them: cheaper, and better, than a round from random samples).
Without measurements out, at once. Two refinements for many workers (issue 20, 64
workers with a 200 ms measurer):

* measurements back beyond a request's worth are owed further requests, sent as the
  requests out allow: the sampler's news restart with each request, so a wait that
  returned dozens of measurements made one request (104 batches in flight of 128;
  owed ones kept 128);
* from :data:`BLIND_WORKERS` workers, while a task's seeds are measured and what it has
  out is under ``1 / BLIND_SHARE`` of what the workers hold (and under the trials left),
  the workers the seeds leave idle measure blind rounds, bred from random samples (no
  parents yet: the cost model's prior ranks them), rather than wait (64 workers: two
  rounds beside the seeds); the first rounds around the measured seeds then go out at
  once.

No request at all once what the task has queued and being bred covers the trials left
(:func:`bred_ahead`): it would only be bred to be thrown away (at the end of a 2-worker
gpt1 tune of 300, one more round of 29 picks, a tenth of all bred, went out with 15
trials left, 4 queued and 29 being bred; issue 20).
"""

from __future__ import annotations

from typing import Any

__all__ = ["BLIND_SHARE", "BLIND_WORKERS", "Cadence", "bred_ahead"]

BLIND_SHARE = 4
"""Blind rounds go out while a task's candidates out are under 1 / BLIND_SHARE of what the
workers hold (at 64 workers the seeds' one batch left 63 idle for a measurement and the
first round's breeding: ~1 s of a 6 s bench)."""

BLIND_WORKERS = 16
"""Blind rounds only from this many workers: with fewer, the seeds' batches keep most of
them busy, and the blind picks, queued ahead of the rounds bred around the seeds, took
the place of those (a review: at 8 workers, 64 of a 100-trial tune's 96 guided records
were blind, and at 4 workers and 20 trials every guided one)."""


def bred_ahead(bs: Any) -> int:
    """Proposals sampler ``bs`` has queued and is having bred (the rounds out, at what its
    last request asked for)."""
    return int(bs.queued + bs.breeding * getattr(bs, "last_proposals", 0))


class Cadence:
    """The breeding cadence of a driver's tasks (see the module doc).

    Args:
        demand: Candidates the pool holds at once per task.
        out: Breeding requests out at once per task.
        fresh: Measurements between two requests while no request said how many it proposed.
        workers: The pool's workers (blind rounds from :data:`BLIND_WORKERS`).
    """

    def __init__(self, demand: int, out: int, fresh: int, workers: int = BLIND_WORKERS) -> None:
        self.demand, self.out, self.fresh, self.workers = demand, out, fresh, workers
        # Tasks that bred before anything of theirs was measured: True until the requests
        # around their first measurements are out.
        self._blind: dict[int, bool] = {}
        self._owed: dict[int, int] = {}  # task -> measurements back not yet bred on

    def may_breed(self, k: int, bs: Any, pending: int, measured: bool,
                  left: int | None = None) -> bool:
        """Whether task ``k``'s sampler ``bs`` is asked for a request now (True: it is:
        the caller makes it, so ask last, after its other conditions).

        ``pending``: the task's candidates out; ``measured``: whether any of it was;
        ``left``: trials of the budget not yet measured or out (None: no bound).
        Half of what the last request proposed, not of the demand's share: a round
        proposes at most ``population`` however much the workers hold (64 workers hold
        512; 8 shares of 12 were asked for once 32 measurements came back each, 12 new
        candidates per 32 measured, and the workers starved), and under ``breed_budget``
        a request proposes more than the demand's share.
        """
        if left is not None and bred_ahead(bs) >= left:
            return False  # what is queued and being bred covers the budget
        if not pending:
            return True
        if not measured:
            return self._blind_round(k, bs, pending, left)
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

    def _blind_round(self, k: int, bs: Any, pending: int, left: int | None) -> bool:
        """A blind round of task ``k`` (from :data:`BLIND_WORKERS` workers) while what it
        has out, queued and being bred is under 1 / :data:`BLIND_SHARE` of the demand and
        under the trials ``left``."""
        if self.workers < BLIND_WORKERS:
            return False
        out = pending + bred_ahead(bs)
        if out * BLIND_SHARE >= self.demand or (left is not None and out >= left):
            return False
        self._blind[k] = True
        return True
