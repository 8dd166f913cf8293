"""What the driver makes of a batch whose call failed, and when it gives up.

A batch whose worker raised (``Finished.error``: Ray's ``RayTaskError``, an exception in the
worker's own code, the measurer's own exceptions being measurements already) is rarely its
candidates' fault: a worker that restarted without its graphs, a bug in the glue. So the
first time a candidate's worker raises, the candidate is recorded ``worker_lost`` with the
message (:data:`autotune.running._notes.RAISED` begins it) and measured again: its trial's
parameters are queued again in its study (a seed measured outside the study goes back to
its task's list), and a resumed job measures it as well. Only a candidate whose worker
raises a second time (after raising in this run or, from the log, an earlier one) while
the workers measure other batches (a batch was measured in this run, and the one before
did not fail) is recorded ``sim_error``, and never measured again. A batch whose worker ran
out of memory (Ray's memory monitor killed it: maybe a candidate's doing) is treated the
same way (:data:`autotune.running._notes.OUT_OF_MEMORY`).

The circuit breaker: a job whose calls keep failing (raised, lost, or any other error Ray
raised) would burn its budget on nothing, so after :meth:`Failures.limit` failed batches
in a row, with no batch measured in between, the job stops with one line (every record
written so far is kept; the same command resumes it).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from autotune.running._notes import AGAIN, RAISED
from autotune.running._pool import failed, lost
from compiler.errors import GraphtuneError

if TYPE_CHECKING:
    from autotune.job._state import JobState
    from autotune.running._pool import Finished
    from sim import Measurement

__all__ = ["Failures"]

log = logging.getLogger("autotune.tune")


class Failures:
    """Sorts a failed batch's candidates (the driver's ``Candidate``) and counts failed
    batches in a row.

    Args:
        workers: The pool's workers.
        slots: Batches the pool holds at once (every worker dying at once loses this many).
    """

    def __init__(self, workers: int, slots: int) -> None:
        # What one death of every worker at once loses, and two calls per worker more.
        self.limit = max(1, slots) + 2 * max(1, workers)
        self.streak = 0  # failed batches in a row
        self.measured = False  # a batch was measured in this run

    def sort(self, job: JobState, batch: list[Any], fin: Finished) -> Finished:
        """``fin`` as the driver records it: a batch whose worker raised comes back with
        each candidate ``worker_lost`` (first raise, queued again by :meth:`requeue`) or
        ``sim_error`` (it raised before)."""
        if fin.kind != "measure" or not fin.error:
            return fin
        why = fin.error if fin.error.startswith(AGAIN) else f"{RAISED}: {fin.error}"
        out: list[Measurement] = []
        # A second raise is the candidate's error only while the workers measure other
        # batches: not in a run of failures (a broken worker fails every candidate twice).
        blame = self.measured and not self.streak
        for c in batch:
            if blame and c.cid in job.tasks[c.task].raised:
                out += failed(1, f"{why} (the second time)")
            else:
                out += lost(1, why)
        log.warning("a batch's worker raised (%s): %d candidate(s) to be measured again, "
                    "%d recorded as sim_error (raised twice)", fin.error,
                    sum(m.status == "worker_lost" for m in out),
                    sum(m.status == "sim_error" for m in out))
        return replace(fin, measurements=tuple(out))

    def requeue(self, job: JobState, batch: list[Any], fin: Finished) -> list[int]:
        """Queue again the candidates of a batch whose worker raised for the first time on
        them (after their records were written); returns the tasks that got one."""
        from autotune.running._reconcile import SEED_ATTR, SEED_CID_ATTR
        from autotune.sampling._polish import POLISH_ATTR

        tasks: list[int] = []
        if fin.kind != "measure" or not fin.error:
            return tasks
        for c, m in zip(batch, fin.measurements):
            if m.status != "worker_lost":
                continue
            ts = job.tasks[c.task]
            if c.trial is None:  # a seed the space cannot express (or a claim's placeholder)
                ts.seeds_direct.append((c.tuner, c.schedule))
                tasks.append(c.task)
                continue
            if not c.params:
                continue  # nothing to queue: its sampler may propose it again
            attrs = {key: v for key, v in c.trial.user_attrs.items()
                     if key in (SEED_ATTR, SEED_CID_ATTR, POLISH_ATTR)}
            ts.study.enqueue_trial(dict(c.params), user_attrs=attrs)
            tasks.append(c.task)
        return tasks

    def count(self, fin: Finished) -> None:
        """Count a finished batch: one measured (not all lost, not raised) ends the streak.

        Raises:
            GraphtuneError: :attr:`limit` batches in a row failed (one line).
        """
        if fin.kind != "measure":
            return
        if not fin.error and any(m.status != "worker_lost" for m in fin.measurements):
            self.streak, self.measured = 0, True
            return
        self.streak += 1
        if self.streak >= self.limit:
            why = fin.error or next((m.error for m in fin.measurements if m.error), "")
            raise GraphtuneError(
                f"measurer workers keep failing ({self.streak} batches in a row, none "
                f"measured; the last: {why[:200]}); the log keeps every measurement so far: "
                "fix the cause and re-run the same command to resume")
