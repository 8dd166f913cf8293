"""Claims: several drivers on one shared study measure each candidate once.

Drivers that share a storage (``graphtune tune --storage ...``, each with its
own log) claim a candidate before measuring it. Under a lock every driver on
the storage takes — an advisory ``flock`` on ``<file>.claims`` beside a journal
or SQLite file, ``pg_advisory_lock`` on PostgreSQL — a claim looks for another
trial of the study that holds the candidate's id (user attribute
``graphtune_cid``) and is running, finished, or failed *with* a measurement
(user attribute ``status``); if there is none it sets the id on its own trial.
The lock makes the check and the set one step; the attribute lives in the
storage, so claims work between hosts on PostgreSQL.

A candidate another driver holds is not measured: a finished one's value is
told to the asking trial, a running one's trial is failed (the sampler does
not propose it again; the holder's result reaches the study when it ends).

A running trial names its driver in ``graphtune_driver`` (host and log path).
A driver holds an exclusive ``flock`` on its log while it runs, so a claim held
by a killed driver on the same host is seen to be stale (its log is not
locked) and ignored, unless that log already holds the trial's record: a driver
writes its log before it tells the study, so one killed in between leaves a
measured candidate behind a running trial (its resume tells the study from the
log; another driver must not measure it again). A killed driver on another host keeps its claims until
its log is resumed there: reconcile fails the running trials its own driver
left, never another driver's.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import socket
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from autotune.running._reconcile import CID_ATTR, OWNER_ATTR, STATUS_ATTR

if TYPE_CHECKING:
    from optuna.study import Study
    from optuna.trial import FrozenTrial

    from autotune.running._journal import StorageHandle

__all__ = ["Claim", "Claims"]

log = logging.getLogger("autotune.tune")


@dataclass(frozen=True)
class Claim:
    """The outcome of claiming a candidate.

    Attributes:
        ours: This driver holds it now and should measure it.
        holder: The other driver's trial that holds it (None when ours).
    """

    ours: bool
    holder: FrozenTrial | None = None


class Claims:
    """Claims candidates in the studies of one shared storage (see the module doc).

    Args:
        handle: The shared storage.
    """

    def __init__(self, handle: StorageHandle) -> None:
        self.storage = handle.storage
        self._fd = -1
        self._conn: Any = None
        self._pg = False
        engine = getattr(self.storage, "engine", None)
        if handle.path:
            self._fd = os.open(handle.path + ".claims", os.O_RDWR | os.O_CREAT, 0o644)
        elif engine is not None and engine.dialect.name == "postgresql":
            self._pg = True
            self._conn = engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        else:
            log.warning("no lock for claims on %s: two drivers may rarely measure one "
                        "candidate twice", handle.where)

    def close(self) -> None:
        """Release the lock file or the database connection."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    @contextlib.contextmanager
    def _locked(self, study: Study) -> Iterator[None]:
        if self._fd >= 0:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        elif self._conn is not None:
            from sqlalchemy import text

            key = zlib.crc32(study.study_name.encode())
            self._conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": key})
            try:
                yield
            finally:
                self._conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
        else:
            yield

    def claim(self, study: Study, trial_id: int, number: int, cid: str) -> Claim:
        """Claim ``cid`` for the trial ``trial_id`` (number ``number``) of ``study``."""
        with self._locked(study):
            holder = self._holder(study, cid, number)
            if holder is not None:
                return Claim(False, holder)
            study._storage.set_trial_user_attr(trial_id, CID_ATTR, cid)
        return Claim(True)

    def claim_new(self, study: Study, cid: str, attrs: dict[str, Any]) -> tuple[int | None, Claim]:
        """Claim ``cid`` for a candidate outside the study's search (a seed the space
        cannot express): a new RUNNING trial without parameters holds it.

        Returns:
            The new trial's id (None when another driver holds ``cid``) and the claim.
        """
        storage = study._storage
        with self._locked(study):
            holder = self._holder(study, cid, -1)
            if holder is not None:
                return None, Claim(False, holder)
            trial_id = storage.create_new_trial(study._study_id)
            for key, value in {**attrs, CID_ATTR: cid}.items():
                storage.set_trial_user_attr(trial_id, key, value)
        return trial_id, Claim(True)

    def measured(self, study: Study, cid: str) -> FrozenTrial | None:
        """A trial of ``study`` that measured ``cid`` successfully (any driver's), or None."""
        from optuna.trial import TrialState

        for t in self._with_cid(study, cid):
            if t.user_attrs.get(CID_ATTR) == cid and t.state == TrialState.COMPLETE and (
                t.user_attrs.get("latency_us") is not None
            ):
                return t
        return None

    def _holder(self, study: Study, cid: str, number: int) -> FrozenTrial | None:
        from optuna.trial import TrialState

        for t in self._with_cid(study, cid):
            if t.number == number or t.user_attrs.get(CID_ATTR) != cid:
                continue
            owner = t.user_attrs.get(OWNER_ATTR)
            if t.state == TrialState.COMPLETE or (t.state == TrialState.RUNNING and (
                    not _dead_here(owner) or _logged(owner, study.study_name, t.number))):
                return t
            if t.state == TrialState.FAIL and t.user_attrs.get(STATUS_ATTR) not in (
                None, "worker_lost"
            ):
                return t  # measured, and the measurement failed
        return None

    def _with_cid(self, study: Study, cid: str) -> list[FrozenTrial]:
        """Trials of ``study`` whose ``graphtune_cid`` may be ``cid``."""
        if self._pg or getattr(self.storage, "engine", None) is not None:
            # One indexed query instead of loading every trial of the study.
            from sqlalchemy import text

            sql = text("SELECT t.trial_id FROM trial_user_attributes a JOIN trials t "
                       "ON t.trial_id = a.trial_id WHERE t.study_id = :sid AND a.key = :key "
                       "AND a.value_json = :value")
            with self.storage.engine.connect() as conn:
                ids = [row[0] for row in conn.execute(sql, {"sid": study._study_id, "key": CID_ATTR,
                                                            "value": json.dumps(cid)})]
            return [self.storage.get_trial(i) for i in ids]
        return study.get_trials(deepcopy=False)


def _dead_here(owner: object) -> bool:
    """Whether ``owner`` (``host:log path``) is a driver on this host that no longer runs."""
    if not isinstance(owner, str):
        return False
    host, _, path = owner.partition(":")
    if host != socket.gethostname() or not path:
        return False
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False  # cannot tell: keep the claim
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return False  # its driver holds the log: alive
    finally:
        os.close(fd)  # closing drops the probe's lock too
    return True


# A driver killed between writing its log and telling the study wrote the record last
# or nearly: the tail of its log is enough (a record is a few KB).
_TAIL_BYTES = 4 << 20


def _logged(owner: object, study_name: str, number: int) -> bool:
    """Whether the log of the dead driver ``owner`` (``host:log path``) holds the record
    of trial ``number`` of ``study_name`` (it was measured, the study was not told)."""
    if not isinstance(owner, str):
        return False
    path = owner.partition(":")[2]
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - _TAIL_BYTES))
            tail = f.read()
    except OSError:
        return False
    for line in reversed(tail.splitlines()):
        try:
            prov = json.loads(line).get("prov") or {}
        except (ValueError, AttributeError):
            continue  # a torn or cut line
        if prov.get("trial") == number and prov.get("study") == study_name:
            return True
    return False
