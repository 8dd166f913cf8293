"""Resume: bring a task's study in line with the tuning log, which is the truth.

The log is flushed record by record; the study's journal is flushed once per
batch (see :mod:`autotune.running._journal`), so after a crash the study may lag the
log. Before tuning resumes, for one task:

1. a trial left running by the crashed driver is told its logged result if it
   has one, and otherwise failed and its parameters re-queued (on a shared
   storage, only trials whose ``graphtune_driver`` attribute names this
   driver: other drivers' running trials are live);
2. logged trials the study lost (its journal tail) are added back under their
   own numbers, in order, so trial numbers in the log stay unique; a number
   whose trial was asked but never measured becomes a failed placeholder;
3. any other logged candidate the study lacks (another storage, another
   sampler's study, a seed) is added as a finished trial, with its logged
   parameters or its projection into the space.

A trial rebuilt from a record of a polish proposal (``prov.polish_of``) is marked
as one again (``graphtune_polish``), so the hill climb and its limit survive a
resume from the log alone. Every trial the driver finishes carries its candidate id in the user
attribute ``graphtune_cid``, so step 3 compares candidates, not parameters,
and the measurement in ``status``, ``latency_us``, ``throughput_per_s`` and
``latency_over_bound`` (what optuna-dashboard shows beside each trial).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from autotune.sampling._polish import POLISH_ATTR, PROV_POLISH
from autotune.sampling._studies import candidate_id, distributions, vector_of
from logs import Status

if TYPE_CHECKING:
    from optuna.study import Study

    from logs import Record
    from search_space import Space

__all__ = ["CID_ATTR", "OWNER_ATTR", "SEED_ATTR", "SEED_CID_ATTR", "STATUS_ATTR", "Reconciled",
           "objective_value", "reconcile", "record_cid", "result_attrs"]

log = logging.getLogger("autotune.tune")

CID_ATTR = "graphtune_cid"
SEED_ATTR = "graphtune_seed"
SEED_CID_ATTR = "graphtune_seed_cid"
OWNER_ATTR = "graphtune_driver"
STATUS_ATTR = "status"


def result_attrs(status: str, latency_us: float | None, throughput_per_s: float | None,
                 lower_bound_us: float) -> dict[str, Any]:
    """The user attributes of a measured trial: status, latency, throughput and the
    latency over the task's roofline bound (None when the measurement failed)."""
    ratio = latency_us / lower_bound_us if latency_us is not None and lower_bound_us > 0 else None
    return {STATUS_ATTR: status, "latency_us": latency_us, "throughput_per_s": throughput_per_s,
            "latency_over_bound": ratio}


@dataclass(frozen=True)
class Reconciled:
    """What :func:`reconcile` changed in a study."""

    told: int = 0
    requeued: int = 0
    restored: int = 0
    added: int = 0

    @property
    def changed(self) -> bool:
        """Whether the study needed any repair."""
        return bool(self.told or self.requeued or self.restored or self.added)


def objective_value(record: Record, objective: str) -> float | None:
    """The study value of a logged result (None: the measurement failed)."""
    r = record.result
    if not r.is_valid:
        return None
    return r.latency_us if objective == "latency" else r.throughput_per_s


def record_cid(record: Record) -> str | None:
    """The candidate id of a logged schedule (None if the schedule does not parse)."""
    from compiler.errors import ScheduleError
    from compiler.schedule import GraphSchedule

    try:
        return candidate_id(GraphSchedule.from_json(dict(record.schedule)))
    except (ScheduleError, KeyError, TypeError, ValueError):
        return None


def reconcile(study: Study, space: Space, records: Sequence[tuple[Record, str]],
              objective: str, owner: str | None = None, lower_bound_us: float = 0.0
              ) -> Reconciled:
    """Repair ``study`` from the task's logged records (see the module doc).

    Args:
        study: The task's study (its storage may be buffered: flush afterwards).
        space: The task's search space (parameter names and choices).
        records: ``(record, candidate id)`` of every usable record of the task, in log order.
        objective: ``"latency"`` or ``"throughput"``.
        owner: On a shared storage, this driver's ``graphtune_driver`` value: running
            trials of other drivers are left alone. None: every running trial is ours.
        lower_bound_us: The task's roofline bound (for the attributes of added trials).
    """
    from optuna.trial import TrialState, create_trial

    dists = distributions(space)
    name = study.study_name
    trials = study.get_trials(deepcopy=False)
    n = len(trials)
    ours: dict[int, tuple[Record, str]] = {}
    for rec, cid in records:
        if rec.prov.study == name and rec.prov.trial is not None and (
            rec.result.status is not Status.WORKER_LOST
        ):
            ours.setdefault(rec.prov.trial, (rec, cid))

    def finish(number: int, rec: Record) -> None:
        value = objective_value(rec, objective)
        if value is None:
            study.tell(number, state=TrialState.FAIL)
        else:
            study.tell(number, value)

    def add(rec: Record | None, cid: str | None, params: dict[str, Any] | None) -> None:
        if rec is None or params is None:
            study.add_trial(create_trial(state=TrialState.FAIL, system_attrs={"graphtune_lost": True}))
            return
        value = objective_value(rec, objective)
        polish_of = rec.prov.extra.get(PROV_POLISH)  # (absent from older records)
        study.add_trial(create_trial(
            state=TrialState.COMPLETE if value is not None else TrialState.FAIL,
            value=value, params=params, distributions={k: dists[k] for k in params},
            user_attrs={CID_ATTR: cid, "graphtune_from_log": rec.prov.tuner,
                        **result_attrs(rec.result.status.value, rec.result.latency_us,
                                       rec.result.throughput_per_s, lower_bound_us),
                        **({POLISH_ATTR: polish_of} if isinstance(polish_of, str) and polish_of
                           else {})},
        ))

    told = requeued = restored = added = 0
    # The lost tail first: new trials take the next numbers, which must be the logged ones.
    tail = sorted(k for k in ours if k >= n)
    if tail:
        for k in range(n, tail[-1] + 1):
            hit = ours.get(k)
            params = _params(hit[0], space) if hit else None
            add(hit[0] if hit else None, hit[1] if hit else None, params)
            restored += 1

    requeue: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for t in trials:
        if t.state != TrialState.RUNNING:
            continue
        if owner is not None and t.user_attrs.get(OWNER_ATTR) != owner:
            continue
        hit = ours.get(t.number)
        if hit is not None and dict(hit[0].prov.params) == t.params:
            study._storage.set_trial_user_attr(t._trial_id, CID_ATTR, hit[1])
            finish(t.number, hit[0])
            told += 1
            continue
        study.tell(t.number, state=TrialState.FAIL)
        if t.params and all(p in dists for p in t.params):
            requeue.append((dict(t.params), dict(t.user_attrs)))
    for params, attrs in requeue:
        study.enqueue_trial(params, user_attrs=attrs)
        requeued += 1

    have = _study_cids(study, space)
    for rec, cid in records:
        if cid in have or rec.result.status is Status.WORKER_LOST:
            continue
        params = _params(rec, space)
        if params is None:
            continue
        add(rec, cid, params)
        have.add(cid)
        added += 1
    out = Reconciled(told, requeued, restored, added)
    if out.changed:
        log.info("study %s reconciled with the log: %d told, %d re-queued, %d restored, "
                 "%d added", name, told, requeued, restored, added)
    return out


def _params(rec: Record, space: Space) -> dict[str, Any] | None:
    """The record's parameters if the space knows them all, else its projection's."""
    params = dict(rec.prov.params)
    if params and vector_of(space, params) is not None:
        return params
    from compiler.errors import ScheduleError
    from compiler.schedule import GraphSchedule

    try:
        proj = space.project(GraphSchedule.from_json(dict(rec.schedule)))
    except ScheduleError:
        return None
    return dict(proj.params) if proj.schedule is not None else None


def _study_cids(study: Study, space: Space) -> set[str]:
    """Candidate ids of the study's finished trials."""
    from optuna.trial import TrialState

    out: set[str] = set()
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL)):
        cid = t.user_attrs.get(CID_ATTR)
        if cid is None and t.params:
            vec = vector_of(space, t.params)
            cid = candidate_id(space.decode(vec)) if vec is not None else None
        if cid is not None:
            out.add(cid)
    return out
