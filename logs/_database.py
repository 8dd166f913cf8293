"""An in-memory index of tuning records: the best k per (workload, target).

Loading streams the files: per index key the database keeps only its top-k
valid records and a few counters (:class:`KeyStats`), so memory grows with the
number of (workload, target) pairs, not with the number of records. Intact
lines written by :class:`~logs.RecordWriter` (their CRC matches) are ranked
from their header alone; their schedule is decoded only when the record enters
a top-k.
"""

from __future__ import annotations

import bisect
import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from logs._io import FileReport, LineScan, Progress
from logs._record import (
    SCHEMA_MAJOR,
    SCHEMA_VERSION,
    IndexKey,
    Record,
    Status,
    TargetKey,
    WorkloadInfo,
)
from logs._schema import check_record, major_of, split_line

PathLike = str | os.PathLike[str]

_Entry = tuple[float, float, str, Record]  # latency, time, canonical text, record


@dataclass(frozen=True)
class KeyStats:
    """Counters of one (workload, target) pair.

    Attributes:
        workload: Summary of the workload (from the first record seen).
        target: The target.
        count: Records seen, valid or not.
        valid: Records with status ok.
        errors: Count per failing status.
        best_latency_us: Lowest latency among valid records, if any.
        best_time_unix_s: When that latency was first measured.
        first_time_unix_s: Earliest record time.
        last_time_unix_s: Latest record time.
    """

    workload: WorkloadInfo
    target: TargetKey
    count: int
    valid: int
    errors: Mapping[Status, int]
    best_latency_us: float | None
    best_time_unix_s: float | None
    first_time_unix_s: float
    last_time_unix_s: float


class _Slot:
    __slots__ = (
        "best_lat",
        "best_time",
        "count",
        "errors",
        "first_time",
        "last_time",
        "target",
        "top",
        "valid",
        "workload",
    )

    def __init__(self, workload: WorkloadInfo, target: TargetKey) -> None:
        self.workload = workload
        self.target = target
        self.count = 0
        self.valid = 0
        self.errors: dict[str, int] = {}
        self.best_lat = math.inf
        self.best_time = math.inf
        self.first_time = math.inf
        self.last_time = -math.inf
        self.top: list[_Entry] = []


class Database:
    """The best ``top_k`` valid records per (workload, target), plus counters.

    "Best" is the lowest ``latency_us`` among records with status ok; ties go
    to the earlier ``time_unix_s``, then to the smaller key-sorted JSON text,
    so the ranking does not depend on the order records were loaded in.
    Identical records (same JSON) count once in the ranking. Targets never mix:
    a record ranks only against records with the same chip and hash.

    Not thread-safe. Values returned are frozen snapshots.

    Example:
        >>> db = Database.load(["run1.jsonl", "run2.jsonl"], top_k=3)
        >>> db.best("9a3f...", TargetKey("STCP920", "c0ffee"), k=1)
        [Record(...)]
    """

    def __init__(self, top_k: int = 1) -> None:
        if top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {top_k}")
        self._top_k = top_k
        self._slots: dict[IndexKey, _Slot] = {}
        self._by_workload: dict[str, list[IndexKey]] = {}
        self._count = 0
        self._reports: list[FileReport] = []

    @classmethod
    def load(
        cls,
        paths: PathLike | Iterable[PathLike],
        *,
        top_k: int = 1,
        progress: Progress | None = None,
    ) -> Database:
        """Load one or many log files (streamed, see :meth:`add_file`)."""
        db = cls(top_k)
        for path in [paths] if isinstance(paths, str | os.PathLike) else paths:
            db.add_file(path, progress=progress)
        return db

    @property
    def top_k(self) -> int:
        """How many records are kept per (workload, target)."""
        return self._top_k

    @property
    def reports(self) -> list[FileReport]:
        """One report per file loaded, in load order."""
        return list(self._reports)

    def __len__(self) -> int:
        """Records added (valid or not), not only those kept."""
        return self._count

    def add_file(self, path: PathLike, *, progress: Progress | None = None) -> FileReport:
        """Stream one log file into the database.

        Bad lines are skipped and reported in one :class:`~logs.LogWarning`.

        Raises:
            LogError: Unreadable file, not a log, or a newer major version.
        """
        scan = LineScan(path, progress)
        slots = self._slots
        top_k = self._top_k
        for lineno, line in scan:
            head: Any
            sched: bytes | None = None
            parsed = split_line(line)
            if parsed is not None:
                head, sched = parsed
                if head.get("v") != SCHEMA_VERSION:
                    scan.upgrade(head, lineno)  # raises for a newer major
                    if major_of(head.get("v")) != SCHEMA_MAJOR:
                        head = sched = None
                if sched is not None and check_record(head, with_schedule=False):
                    head = sched = None  # a CRC that matches but a header that does not check
            if sched is None:
                head = scan.decode(lineno, line)
                if head is None:
                    continue
            try:
                w = head["workload"]
                t = head["target"]
                r = head["result"]
                key = (w["key"], t["chip"], t["hash"])
                time_s = head["prov"]["time_unix_s"]
                slot = slots.get(key)
                record = None
                latency = r["latency_us"] if r["status"] == "ok" else math.inf
                if latency != math.inf and (
                    slot is None or len(slot.top) < top_k or latency <= slot.top[-1][0]
                ):
                    if sched is not None:
                        head["schedule"] = json.loads(sched)
                    record = Record._from_checked(head)
                if slot is None:
                    workload = WorkloadInfo.from_json(w)
                    target = TargetKey(t["chip"], t["hash"])
            except (KeyError, TypeError, ValueError, AttributeError, RecursionError) as exc:
                # Only a line with a forged CRC gets here: every other line was checked.
                scan.bad(lineno, f"inconsistent record ({exc!r})", line, decoded=True)
                continue
            if slot is None:
                slot = self._new_slot(key, workload, target)
            scan.records += 1
            self._tally(slot, r["status"], latency, time_s, record)
        report = scan.finish()
        self._reports.append(report)
        return report

    def add(self, record: Record) -> None:
        """Add one record."""
        slot = self._slots.get(record.index_key)
        if slot is None:
            slot = self._new_slot(record.index_key, record.workload, record.target)
        result = record.result
        latency = result.latency_us if result.is_valid and result.latency_us else math.inf
        self._tally(slot, result.status.value, latency, record.prov.time_unix_s, record)

    def add_all(self, records: Iterable[Record]) -> None:
        """Add records one by one."""
        for record in records:
            self.add(record)

    def best(self, workload_key: str, target: TargetKey | str, k: int = 1) -> list[Record]:
        """The best ``k`` valid records of a workload on a target, best first.

        Args:
            workload_key: The workload's key.
            target: A :class:`TargetKey` or its ``"<chip>:<hash>"`` string.
            k: How many; at most :attr:`top_k`.

        Returns:
            Up to ``k`` records; empty on a miss (including a target mismatch).
        """
        if k > self._top_k:
            raise ValueError(f"asked for the best {k}, but this database keeps {self._top_k}")
        if isinstance(target, str):
            target = TargetKey.parse(target)
        slot = self._slots.get((workload_key, target.chip, target.hash))
        if slot is None:
            return []
        return [entry[3] for entry in slot.top[:k]]

    def query(self, workload_key: str) -> dict[TargetKey, list[Record]]:
        """All kept records of a workload, per target (targets with no valid record map to [])."""
        return {
            self._slots[key].target: [entry[3] for entry in self._slots[key].top]
            for key in self._by_workload.get(workload_key, [])
        }

    def workloads(self) -> list[str]:
        """Workload keys seen, sorted."""
        return sorted(self._by_workload)

    def targets(self, workload_key: str) -> list[TargetKey]:
        """Targets a workload has records for, sorted."""
        return sorted(self._slots[key].target for key in self._by_workload.get(workload_key, []))

    def keys(self) -> list[IndexKey]:
        """All ``(workload_key, chip, hash)`` keys, sorted."""
        return sorted(self._slots)

    def stats(self, workload_key: str, target: TargetKey | str) -> KeyStats | None:
        """Counters of one (workload, target) pair, or None if it has no record."""
        if isinstance(target, str):
            target = TargetKey.parse(target)
        slot = self._slots.get((workload_key, target.chip, target.hash))
        return None if slot is None else _snapshot(slot)

    def all_stats(self) -> list[KeyStats]:
        """Counters of every pair, sorted by key."""
        return [_snapshot(self._slots[key]) for key in sorted(self._slots)]

    def best_records(self) -> Iterator[Record]:
        """Every kept record, by key then rank (the order distill writes)."""
        for key in sorted(self._slots):
            for entry in self._slots[key].top:
                yield entry[3]

    def _new_slot(self, key: IndexKey, workload: WorkloadInfo, target: TargetKey) -> _Slot:
        slot = self._slots[key] = _Slot(workload, target)
        self._by_workload.setdefault(key[0], []).append(key)
        return slot

    def _tally(
        self, slot: _Slot, status: str, latency: float, time_s: float, record: Record | None
    ) -> None:
        self._count += 1
        slot.count += 1
        if time_s < slot.first_time:
            slot.first_time = time_s
        if time_s > slot.last_time:
            slot.last_time = time_s
        if latency == math.inf:
            slot.errors[status] = slot.errors.get(status, 0) + 1
            return
        slot.valid += 1
        if latency < slot.best_lat or (latency == slot.best_lat and time_s < slot.best_time):
            slot.best_lat = latency
            slot.best_time = time_s
        top = slot.top
        if record is None or (len(top) == self._top_k and latency > top[-1][0]):
            return
        text = record.canonical()
        if any(entry[2] == text for entry in top):
            return
        bisect.insort(top, (latency, time_s, text, record))
        del top[self._top_k :]


def _snapshot(slot: _Slot) -> KeyStats:
    has_valid = slot.valid > 0
    return KeyStats(
        workload=slot.workload,
        target=slot.target,
        count=slot.count,
        valid=slot.valid,
        errors={Status(status): n for status, n in sorted(slot.errors.items())},
        best_latency_us=slot.best_lat if has_valid else None,
        best_time_unix_s=slot.best_time if has_valid else None,
        first_time_unix_s=slot.first_time,
        last_time_unix_s=slot.last_time,
    )
