"""The tuning loop: one driver asks and tells, a pool measures, the log records.

Loop: while the budget allows and a task is live, the scheduler picks a task,
its study proposes a batch (``study.ask()`` + ``space.suggest(trial)``), the
batch goes to the pool; finished batches come back in any order and each
measurement becomes one record in the log (appended and flushed) before its
trial is told. Side effects beyond the log and the study (progress, user
hooks) are callbacks, called after every finished batch.

The guided sampler's breeding (most of a job's work) is a job of the pool too:
when a task's sampler runs low on proposals the driver asks it for a share of a
round (:meth:`GuidedSampler.breed_request`: with ``W`` workers, ``1/W`` of the
population and of the proposals, ``W`` at most :data:`MAX_SHARES`; at most
:data:`MAX_OUT` requests out at once), sends it to a
worker that is not breeding, and
hands it back to the sampler as soon as it arrives, so its picks are measured while
the other workers still breed theirs; so the driver only asks, tells and writes the
log, and the workers breed and measure (:mod:`autotune.sampling._breed`). Up to one share per
worker is out per task, and each is asked for only once half a share's measurements
came back since the last one was (so no worker waits for another's share, and no
share is bred from exactly the parents and model of the one before).

A batch whose worker raised is measured again (a candidate that raises twice is an error),
and a job whose calls keep failing stops (:mod:`autotune.running._failures`); a breeding
request that raised counts as failed (:meth:`Driver._bred`).

A candidate already measured (in this run or any run in the log) is never
measured again: its trial is told the logged value. A candidate proposed twice
while in flight is measured once and both trials are told. On a shared storage
every new candidate is claimed through the storage first
(:mod:`autotune.running._claims`), so drivers on one study never measure one twice.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, cast

from autotune.job._state import JobState, TaskState
from autotune.running._cadence import Cadence
from autotune.running._failures import Failures
from autotune.running._notes import note_measurement as note_measurement
from autotune.running._notes import objective_of
from autotune.running._reconcile import CID_ATTR, OWNER_ATTR, SEED_ATTR, SEED_CID_ATTR, result_attrs
from autotune.running._trials import set_user_attrs
from autotune.sampling._polish import POLISH_ATTR, PROV_POLISH
from autotune.sampling._studies import candidate_id, seed_schedules
from compiler.errors import GraphtuneError
from logs import RecordWriter, ScheduleText

if TYPE_CHECKING:
    import numpy as np
    from optuna.trial import FrozenTrial, Trial

    from autotune.job._scheduler import GradientScheduler
    from autotune.measure._measurer import Measurer
    from autotune.running._claims import Claims
    from autotune.running._journal import StorageHandle
    from autotune.running._pool import Finished, MeasurePool
    from compiler.schedule import GraphSchedule
    from compiler.target import Target
    from sim import Measurement

__all__ = ["Callback", "Candidate", "Driver"]

log = logging.getLogger("autotune.tune")

Callback = Callable[[JobState], None]
"""Called with the job's state after every finished batch."""

# Proposals in a row that were all measured before: the study keeps proposing old
# candidates, so the task is done.
_DUP_LIMIT = 64
# Breeding requests in a row that brought nothing new: the sampler then breeds in the driver
# (where an empty round falls back to random proposals, and duplicates stop the task).
_DRY_LIMIT = 3
# The study storage is made durable at most this often (a journal append + fsync per
# finished batch is what 64 workers cannot afford); the log, the truth, is flushed per
# record, and a resumed job restores what the storage lost from it.
FLUSH_EVERY_S = 1.0
# A round is bred in at most this many shares at once, however many workers measure: every
# share decodes the parents and its own random samples whatever its size, so 64 shares of
# 2 proposals each (64 workers) cost ~6 decodes per proposal where 8 shares of 12 cost ~3;
# and each pays the cost model's fixed costs (features, three predictions): on tiny_cnn
# with a trained model, 1.6-1.9 ms of CPU per proposal in 8 shares of 12, 1.2-1.4 in 4 of
# 24, 1.0-1.15 in 2 of 48 (the same decodes per proposal; issue 20).
MAX_SHARES = 2
# Breeding requests out at once per task (each a share of a round; the next is asked for
# once half of the last one's proposals were measured): what keeps the workers fed is
# requests out x proposals each / a request's wall time (queued on a busy worker, it
# waits for the batches ahead of it). 64 workers, 200 ms measurements, loaded machine:
# 2 out held 47 jobs in flight of 128 (50 %), 4 out 70 (62 %), 8 out 81 but bred more
# than was measured (60 %, 9.3 against 7.8 ms of CPU per measurement). A pool of
# multi-slot processes breeds on this many actors of its own (RayPool's BREEDERS).
MAX_OUT = 4


@dataclass
class Candidate:
    """One schedule on its way to a worker."""

    task: int
    trial: Trial | None
    schedule: GraphSchedule
    cid: str
    params: dict[str, Any]
    tuner: str
    cost_model: str
    placeholder: int | None = None  # the trial id holding a claim of a trial-less candidate
    polish_of: str = ""  # a polish proposal: the candidate id of the schedule polished
    vector: tuple[int, np.ndarray] | None = None  # its space's batch and vector, if bred
    # its JSON as sent to the pool (a bred pick's, as its breeder made it: see
    # autotune.sampling._breed.Pick; from a Ray worker, as its log text: a logs.ScheduleText):
    # the record's schedule is the same with its ``source`` set (writing a bred schedule's
    # JSON again cost the driver 0.06-0.6 ms a measurement)
    json: Mapping[str, Any] | None = None


def is_seed_label(tuner: str) -> bool:
    """Whether ``prov.tuner`` names a seed (``O0``-``O3``, ``plan:<name>``)."""
    return tuner in ("O0", "O1", "O2", "O3") or tuner.startswith("plan:")


class Driver:
    """Runs a job (see the module doc). Built by :func:`autotune.tune`.

    Args:
        job: The tasks and counters.
        scheduler: Picks the task of each batch (its progress list matches ``job.tasks``).
        pool: Where batches are measured.
        writer: The log.
        storage: The studies' storage (flushed after each finished batch).
        target: The chip (records name it).
        measurer: Named in the records.
        objective: ``"latency"`` or ``"throughput"``.
        tuner: ``prov.tuner`` of sampler proposals (``graphtune-guided``, ``optuna-tpe``).
        batch_size: Candidates per batch.
        callbacks: Called after every finished batch.
        claims: On a shared storage: where candidates are claimed before measuring.
        owner: This driver's ``graphtune_driver`` attribute (host and log) on a shared storage.
    """

    def __init__(self, job: JobState, scheduler: GradientScheduler, pool: MeasurePool,
                 writer: RecordWriter, storage: StorageHandle, target: Target,
                 measurer: Measurer, objective: str, tuner: str, batch_size: int,
                 callbacks: Sequence[Callback] = (), claims: Claims | None = None,
                 owner: str = "") -> None:
        self.job = job
        self.scheduler = scheduler
        self.pool = pool
        self.writer = writer
        self.storage = storage
        self.target = target
        self.measurer = measurer
        self.objective = objective
        self.tuner = tuner
        self.batch_size = max(1, batch_size)
        self.callbacks = list(callbacks)
        self.claims = claims
        self.owner = owner
        self._batches: dict[int, list[Candidate]] = {}
        self._next_batch = 0
        self._n_pending = 0  # candidates in self._batches
        self._task_pending: dict[int, int] = {}  # ... per task
        self._drained: set[int] = set()  # tasks whose private study has no enqueued trials
        # Candidates being measured -> other trials waiting for them.
        self._inflight: dict[tuple[int, str], list[Trial]] = {}
        self._host = socket.gethostname()
        # What the pool holds at once, per task: the guided sampler proposes rounds at
        # least this large (see GuidedSampler.demand), and a new round is bred once fewer
        # proposals than this are left.
        self._demand = max(1, pool.slots * self.batch_size // max(1, len(job.tasks)))
        self._breeding: dict[int, int] = {}  # batch id of a breeding request -> its task
        # Breeding requests out at once per task (one per worker) and the measurements
        # that must come back between two of them (half a request's proposals).
        self._shares = min(pool.workers, MAX_SHARES) if pool.remote else 1
        self._out = min(pool.workers, MAX_OUT) if pool.remote else 1  # requests out at once
        self._cadence = Cadence(self._demand, self._out,
                                max(1, self._demand // (2 * self._shares)),
                                pool.workers if pool.remote else 1)
        self._failures = Failures(pool.workers, pool.slots)
        self._breeders: dict[int, Any] = {}  # task -> its sampler, if the pool breeds for it
        self._breed_failed: dict[int, int] = {}  # task -> its requests failed in a row
        self._dists: dict[int, dict[str, Any]] = {}  # task -> its parameter distributions
        for k, ts in enumerate(job.tasks):
            sampler = ts.study.sampler
            if hasattr(sampler, "demand"):
                sampler.demand = self._demand
            if hasattr(sampler, "breed_request") and (not pool.remote
                                                      or sampler.snapshot() is not None):
                self._breeders[k] = sampler

    # ---- the loop --------------------------------------------------------------------------
    def run(self) -> None:
        """Measure until the budget is spent or every task stopped."""
        flushed = time.monotonic()
        while True:
            self._fill()
            if not self.pool.in_flight:
                break
            if self.pool.in_flight <= len(self._breeding) and self._spent():
                break  # only breeding rounds left, and nothing more to measure
            for fin in self.pool.wait(timeout_s=1.0):
                if fin.kind == "breed":
                    self._bred(fin)
                    continue
                batch = self._batches.pop(fin.batch_id)
                self._measured_in(batch, fin.seconds)
                self._n_pending -= len(batch)
                for c in batch:
                    self._task_pending[c.task] -= 1
                fin = self._failures.sort(self.job, batch, fin)
                self._finish(batch, fin)
                self._drained.difference_update(self._failures.requeue(self.job, batch, fin))
                self.job.rounds += 1
                self._failures.count(fin)  # raises when calls keep failing
                if time.monotonic() - flushed >= FLUSH_EVERY_S:
                    self.storage.flush(wait=False)  # its fsync off this thread
                    flushed = time.monotonic()
                for cb in self.callbacks:
                    cb(self.job)
        self.storage.flush()
        if self.claims is not None:
            self._foreign_baselines()

    def _measured_in(self, batch: list[Candidate], seconds: float) -> None:
        """Tell the batch's sampler what a measurement takes (its breeding effort follows)."""
        if batch and seconds > 0:
            bs = self._breeders.get(batch[0].task)
            if bs is not None and hasattr(bs, "note_measured"):
                bs.note_measured(seconds, len(batch))

    def _foreign_baselines(self) -> None:
        """Seeds another driver on the shared study measured: their latencies, from the study."""
        assert self.claims is not None
        for ts in self.job.tasks:
            for cid in set(ts.seed_cids.values()) - set(ts.latency):
                holder = self.claims.measured(ts.study, cid)
                if holder is not None:
                    ts.latency[cid] = float(holder.user_attrs["latency_us"])

    def _pending(self) -> int:
        return self._n_pending

    def _fill(self) -> None:
        if self.job.out_of_time:
            return  # --time-budget: what is in flight finishes, nothing new starts
        picked: set[int] = set()
        self._fill_batches(picked)
        if not self.pool.remote:
            return  # in-process, a round is bred when the last one is used up (as it must)
        left = self.job.budget - self.job.total - self._pending()
        for k in sorted(picked):  # breed ahead: the next round is ready when needed
            bs = self._breeder(k)
            while (bs is not None and bs.breeding < self._out and not self.job.tasks[k].stopped
                   and bs.queued < min(self._demand, left)
                   and (bs.queued or not self._waiting(k))  # seeds go first
                   and self._may_breed(k, bs, left)):  # last: True makes the request
                self._breed(k, bs)

    def _fill_batches(self, picked: set[int]) -> None:
        # Breeding rounds take no slot: they are queued behind the batches on the workers.
        while self.pool.in_flight - len(self._breeding) < self.pool.slots:
            left = self.job.budget - self.job.total - self._pending()
            if left <= 0:
                return
            k = self.scheduler.next_task()
            if k is None:
                return
            picked.add(k)
            bs = self._breeder(k)
            if bs is not None and not bs.queued and not self._waiting(k):
                while (bs.breeding < self._out and not self.job.tasks[k].stopped
                       and self._may_breed(k, bs, left)):
                    self._breed(k, bs)
                return  # the task's next proposals are being bred
            batch = self._propose(k, min(self.batch_size, left))
            if self.job.tasks[k].stopped:
                self._stop(k, self.job.tasks[k].stopped)
            if not batch:
                if bs is not None and not self.job.tasks[k].stopped:
                    if bs.breeding:
                        return  # its next round is being bred
                    continue  # its proposals were used up (repeats): breed the next round
                if not self._any_inflight(k):
                    self._stop(k, self.job.tasks[k].stopped or "nothing new to propose")
                    continue
                return  # its in-flight candidates may still change the sampler's mind
            bid = self._next_batch
            self._next_batch += 1
            self._batches[bid] = batch
            self._n_pending += len(batch)
            self._task_pending[k] = self._task_pending.get(k, 0) + len(batch)
            # A remote worker decodes a bred pick's vector again (cheaper than its JSON).
            vectors = [c.vector for c in batch] if self.pool.remote else []
            sent: list[Any] = []  # (dicts, or a Ray worker's picks' logs.ScheduleText)
            for c in batch:
                if c.json is None:  # a bred pick's came with it
                    c.json = c.schedule.to_json()
                sent.append(c.json)
            self.pool.submit(bid, self.job.tasks[k].task.key, sent, [c.cid for c in batch],
                             vectors=vectors if any(v is not None for v in vectors) else None)

    def _spent(self) -> bool:
        """The budget is spent (measured or being measured), or every task stopped."""
        return (self.job.budget - self.job.total - self._pending() <= 0
                or all(ts.stopped for ts in self.job.tasks) or self.job.out_of_time)

    def _breeder(self, k: int) -> Any:
        """Task ``k``'s sampler if the pool breeds its rounds (None: it breeds when asked)."""
        bs = self._breeders.get(k)
        return (bs if bs is not None and bs.dry < _DRY_LIMIT
                and self._breed_failed.get(k, 0) < _DRY_LIMIT else None)

    def _breed(self, k: int, bs: Any) -> None:
        """Send a share of a breeding round of task ``k`` to the pool."""
        from autotune.sampling._breed import RankerScorer

        ts = self.job.tasks[k]
        in_flight = {cid for task, cid in self._inflight if task == k}
        request = bs.breed_request(ts.study, share=self._shares, pending=in_flight)
        scorer = bs.snapshot() if self.pool.remote else RankerScorer(bs.ranker)
        bid = self._next_batch
        self._next_batch += 1
        self._breeding[bid] = k
        self.pool.submit_breed(bid, ts.task.key, request, scorer)

    def _bred(self, fin: Finished) -> None:
        """A breeding request is back: its picks go to its sampler at once (a lost one:
        nothing, and another is asked for). One that failed in its worker (raised, ran out of
        memory...) counts against the pool: after :data:`_DRY_LIMIT` in a row (the driver's
        count, which only a request bred remotely resets) the task's rounds are bred here
        for the rest of the run."""
        bs = self._breeders[k := self._breeding.pop(fin.batch_id)]
        bs.bred(fin.bred)
        if fin.error:
            n = self._breed_failed[k] = self._breed_failed.get(k, 0) + 1
            if n <= _DRY_LIMIT:
                log.warning("task %s: a breeding request failed in its worker (%s)%s",
                            self.job.tasks[k].task.name, fin.error, "; the task's rounds are "
                            "bred here from now on" if n == _DRY_LIMIT else "")
        elif fin.bred is not None and self._breed_failed.get(k, 0) < _DRY_LIMIT:
            self._breed_failed[k] = 0

    def _may_breed(self, k: int, bs: Any, left: int) -> bool:
        """Whether task ``k``'s sampler is asked for a breeding request now (True: it is,
        and the caller makes it): :class:`autotune.running._cadence.Cadence`."""
        return self._cadence.may_breed(k, bs, self._task_pending.get(k, 0),
                                       bool(self.job.tasks[k].measured), left)

    def _waiting(self, k: int) -> bool:
        """Task ``k``'s study has enqueued trials (seeds, re-queued ones) to hand out.

        Reading the trial states is a scan of the whole study (Optuna's storages keep no
        index by state), so it is not done on every ask: trials are enqueued before the
        loop starts (seeds, re-queued and warm-start trials), so once a private study has
        none left it has none for the rest of the run. A shared study is looked at on every
        ask, as before: another driver may enqueue its seeds at any time, and skipping
        them let two drivers of a farm measure one candidate (test_farm, once in a loaded
        full-suite run).
        """
        if k in self._drained:
            return False
        from optuna.trial import TrialState

        study = self.job.tasks[k].study
        found = bool(study._storage.get_all_trials(study._study_id, deepcopy=False,
                                                   states=(TrialState.WAITING,)))
        if not found and self.claims is None:
            self._drained.add(k)
        return found

    def _any_inflight(self, k: int) -> bool:
        return self._task_pending.get(k, 0) > 0

    def _stop(self, k: int, why: str) -> None:
        self.scheduler.stop(k, why)
        self.job.tasks[k].stopped = self.scheduler.tasks[k].stopped
        log.info("task %s stops: %s", self.job.tasks[k].task.name, why)

    # ---- proposing -------------------------------------------------------------------------
    def _propose(self, k: int, n: int) -> list[Candidate]:
        """Up to ``n`` new candidates of task ``k`` (seeds the space cannot express first)."""
        ts = self.job.tasks[k]
        out: list[Candidate] = []
        while ts.seeds_direct and len(out) < n:
            label, s = ts.seeds_direct.pop(0)
            cid = candidate_id(s)
            if cid not in ts.measured and (k, cid) not in self._inflight:
                placeholder = None
                if self.claims is not None:
                    placeholder, claim = self.claims.claim_new(
                        ts.study, cid, {SEED_ATTR: label, OWNER_ATTR: self.owner})
                    if not claim.ours:
                        self._taken(ts, None, cid, claim.holder)
                        continue
                self._inflight[(k, cid)] = []
                out.append(Candidate(k, None, s, cid, {}, label, "", placeholder))
        attempts = 0
        bs = self._breeder(k)
        while len(out) < n and attempts < 4 * n + 8:
            attempts += 1
            if bs is not None and not bs.queued and not self._waiting(k):
                break  # the rest comes from the round being bred
            c = self._ask(k)
            if c is None:
                continue
            if c.cid in ts.measured:
                self._tell(c.trial, ts.measured[c.cid])
                ts.dup_streak += 1
                if ts.dup_streak >= _DUP_LIMIT:
                    ts.stopped = f"{_DUP_LIMIT} proposals in a row were measured before"
                    break
                continue
            ts.dup_streak = 0
            waiting = self._inflight.get((k, c.cid))
            if waiting is not None:
                if c.trial is not None:
                    waiting.append(c.trial)
                continue
            if self.claims is not None and c.trial is not None:
                claim = self.claims.claim(ts.study, c.trial._trial_id, c.trial.number, c.cid)
                if not claim.ours:
                    self._taken(ts, c.trial, c.cid, claim.holder)
                    ts.dup_streak += 1
                    if ts.dup_streak >= _DUP_LIMIT:
                        ts.stopped = f"{_DUP_LIMIT} proposals in a row were measured before"
                        break
                    continue
            self._inflight[(k, c.cid)] = []
            out.append(c)
        return out

    def _taken(self, ts: TaskState, trial: Trial | None, cid: str,
               holder: FrozenTrial | None) -> None:
        """Another driver holds ``cid``: tell ``trial`` the holder's value (fail it while the
        holder measures); a seed's baseline comes from the holder's measurement."""
        from optuna.trial import TrialState

        done = holder is not None and holder.state == TrialState.COMPLETE
        if holder is not None and cid in ts.seed_cids.values() and cid not in ts.latency:
            latency = holder.user_attrs.get("latency_us")
            if latency is not None:
                ts.latency[cid] = float(latency)
        if trial is not None:
            if holder is not None:
                trial.set_user_attr("graphtune_claimed_by", holder.number)
            self._tell(trial, holder.value if done and holder is not None else None)

    def _ask(self, k: int) -> Candidate | None:
        from optuna.trial import TrialState

        ts = self.job.tasks[k]
        sampler = ts.study.sampler
        made: Trial | None = None
        if hasattr(sampler, "ask_queued") and not self._waiting(k):
            # The guided sampler's next proposal (bred and decoded already, on a worker or
            # here): the trial is made with its parameters in one write.
            made = sampler.ask_queued(
                ts.study, self._distributions(k),
                {} if self.claims is None else {OWNER_ATTR: self.owner},
                cid_attr=CID_ATTR if self.claims is None else None)
        params: dict[str, Any] | None = None
        vector: tuple[int, np.ndarray] | None = None
        sent: dict[str, Any] | None = None
        if made is not None:
            trial = made
            s, chosen = sampler.proposal(trial.number)
            params = dict(chosen)  # what the trial was made with (trial.params deep-copies)
            cid = sampler.candidate_of(trial.number)
            v = sampler.vector_of(trial.number) if hasattr(sampler, "vector_of") else None
            vector = (ts.space.batch, v) if v is not None else None
            sent = sampler.json_of(trial.number) if hasattr(sampler, "json_of") else None
        else:  # an enqueued trial (seed, re-queued), or another sampler's proposal
            trial = ts.study.ask()
            try:
                s = ts.space.suggest(trial)
            except GraphtuneError as exc:
                log.warning("task %s trial %d: the space cannot decode its parameters: %s",
                            ts.task.name, trial.number, exc)
                ts.study.tell(trial, state=TrialState.FAIL)
                return None
            cid = candidate_id(s)
            if self.claims is None:
                trial.set_user_attr(CID_ATTR, cid)
            else:  # the id is set by the claim, under the storage's lock
                trial.set_user_attr(OWNER_ATTR, self.owner)
        seed = trial.user_attrs.get(SEED_ATTR)
        if seed and trial.user_attrs.get(SEED_CID_ATTR) not in (None, cid):
            # The enqueued parameters did not reproduce the seed: measure the seed as it is.
            log.warning("task %s: seed %s did not decode to itself; measured outside the study",
                        ts.task.name, seed)
            ts.seeds_direct.extend(x for x in seed_schedules(ts.task.graph, self.target)
                                   if x[0] == seed)
            seed = None
        ranked = sampler.ranked_by(trial.number) if hasattr(sampler, "ranked_by") else ""
        polish_of = sampler.polish_of(trial.number) if hasattr(sampler, "polish_of") else ""
        if not polish_of:  # a polish trial re-queued from the journal: its mark is the attribute
            mark = trial.user_attrs.get(POLISH_ATTR)
            polish_of = mark if isinstance(mark, str) else ""
        tuner = str(seed) if seed else self.tuner
        return Candidate(k, trial, s, cid, dict(trial.params) if params is None else params,
                         tuner, ranked, polish_of=polish_of, vector=None if seed else vector,
                         json=None if seed else sent)

    def _distributions(self, k: int) -> dict[str, Any]:
        """Task ``k``'s parameter distributions (what ``suggest_categorical`` records)."""
        dists = self._dists.get(k)
        if dists is None:
            from optuna.distributions import CategoricalDistribution

            dists = self._dists[k] = {name: CategoricalDistribution(choices)
                                      for name, choices in self.job.tasks[k].choices.items()}
        return dists

    def _tell(self, trial: Trial | None, value: float | None) -> None:
        from optuna.trial import TrialState

        if trial is None:
            return
        try:  # Study.tell without the deep copy of the trial it returns (unread here)
            from optuna.study._tell import _tell_with_warning as tell
        except ImportError:  # not in this Optuna: the public call
            tell = type(trial.study).tell  # type: ignore[assignment]
        if value is None:
            tell(trial.study, trial, state=TrialState.FAIL)
        else:
            tell(trial.study, trial, value)

    # ---- results ---------------------------------------------------------------------------
    def _finish(self, batch: list[Candidate], fin: Finished) -> None:
        for c, m in zip(batch, fin.measurements):
            self._record(c, m, fin.host or self._host)

    def _record(self, c: Candidate, m: Measurement, host: str) -> None:
        ts = self.job.tasks[c.task]
        study = ts.study.study_name if c.trial is not None else ""
        schedule: GraphSchedule | Mapping[str, Any] = c.schedule if c.json is None else c.json
        if not is_seed_label(c.tuner):
            source = f"tuner:{study}/{c.trial.number if c.trial else ''}"
            # (the same JSON as ``replace(c.schedule, source=source).to_json()``; a pick's
            # log text from its worker has it spliced in: autotune.running._texts)
            schedule = (replace(c.schedule, source=source) if c.json is None
                        else c.json.with_source(source) if type(c.json) is ScheduleText
                        else {**c.json, "source": source})
        if not m.lower_bound_us and ts.lower_bound_us:  # a plug-in measurer gave none
            m = replace(m, lower_bound_us=ts.lower_bound_us)
        # (a ScheduleText is kept as it is: its to_json() is itself)
        rec = m.to_record(ts.task.graph, cast("Any", schedule), self.target,
                          measurer=self.measurer.name,
                          measurer_version=self.measurer.version, tuner=c.tuner, study=study,
                          trial=c.trial.number if c.trial is not None else None, host=host,
                          params=c.params, cost_model=c.cost_model,
                          extra={PROV_POLISH: c.polish_of} if c.polish_of else {})
        self.writer.write(rec)  # the log first: it is the truth
        # A lost candidate was not measured: its trials fail and it may be proposed again.
        value = self.value(m) if m.status != "worker_lost" else None
        attrs = result_attrs(m.status, m.latency_us, m.throughput_per_s, ts.lower_bound_us)
        if c.trial is not None:
            set_user_attrs(c.trial, attrs)
        elif c.placeholder is not None:
            from optuna.trial import TrialState

            storage = ts.study._storage
            set_user_attrs(None, attrs, storage, c.placeholder)
            # Failed, not complete: it has no parameters for a sampler to learn from.
            storage.set_trial_state_values(c.placeholder, TrialState.FAIL)
        self.note(ts, c.tuner, rec.schedule, c.trial.number if c.trial else None, m, c.cid)
        self._tell(c.trial, value)
        for trial in self._inflight.pop((c.task, c.cid), []):
            self._tell(trial, value)
        self.job.measured_now += 1
        ts.new += 1
        self.scheduler.record(c.task, m.latency_us if m.ok else None)
        if self.scheduler.tasks[c.task].stopped and not ts.stopped:
            ts.stopped = self.scheduler.tasks[c.task].stopped

    def value(self, m: Measurement) -> float | None:
        """The study value of a measurement (None: failed)."""
        return objective_of(m, self.objective)

    def note(self, ts: TaskState, tuner: str, schedule: GraphSchedule | Mapping[str, Any],
             trial: int | None, m: Measurement, cid: str) -> None:
        """Update a task's counters, best, baselines and curve with one measurement."""
        note_measurement(ts, self.objective, tuner, schedule, trial, m, cid)

