"""``ApplyHistoryBest``: compile with the best tuned schedule from tuning logs."""

from __future__ import annotations

import copy
import os
import warnings
from collections.abc import Iterable
from typing import Any

from compiler.dispatch import DispatchContext
from logs import Database, LogError, TargetKey

PathLike = str | os.PathLike[str]


class HistoryMissWarning(UserWarning):
    """A compile found no tuned schedule and fell back to the automatic level."""


class ApplyHistoryBest(DispatchContext):
    """A dispatch context that answers with the best valid record of a log.

    While it is active, a compile asks it for the schedule of its workload on
    its target (``compiler.dispatch.resolve``). A hit returns the best record's
    schedule. A miss (no valid record for that workload on that exact target:
    a record for another target never matches) lets the next context answer;
    if none does, the compile uses the automatic level and this context warns
    once per (workload, target), naming the key and the fallback, or raises
    :class:`~logs.LogError` when ``strict``.

    Contexts stack (the innermost is asked first). Counters :attr:`hits` and
    :attr:`misses` count the queries this context answered or could not answer.

    Args:
        records: A log path, several paths, or a :class:`logs.Database`.
        strict: Make a miss an error instead of a warning.

    Raises:
        LogError: A log cannot be read (missing, not a log, newer version).

    Example:
        >>> with ApplyHistoryBest("best.jsonl"):
        ...     model.compile("model.stcobj")
    """

    def __init__(
        self, records: PathLike | Iterable[PathLike] | Database, *, strict: bool = False
    ) -> None:
        if isinstance(records, Database):
            self._db = records
            self._source = "the given database"
        else:
            paths = (
                [os.fspath(records)]
                if isinstance(records, str | os.PathLike)
                else [os.fspath(p) for p in records]
            )
            if not paths:
                raise LogError("ApplyHistoryBest needs at least one log file")
            self._db = Database.load(paths, top_k=1)
            self._source = ", ".join(paths)
        self.strict = strict
        self._hits = 0
        self._misses = 0
        self._warned: set[tuple[str, str]] = set()

    def __enter__(self) -> ApplyHistoryBest:
        super().__enter__()
        return self

    @property
    def database(self) -> Database:
        """The records this context answers from."""
        return self._db

    @property
    def hits(self) -> int:
        """Queries answered with a tuned schedule."""
        return self._hits

    @property
    def misses(self) -> int:
        """Queries this context had no valid record for."""
        return self._misses

    def query(self, workload_key: str, target_key: str) -> dict[str, Any] | None:
        """The best schedule JSON for the workload on the target, or None (a miss)."""
        found = self._db.best(workload_key, TargetKey.parse(target_key), 1)
        if not found:
            self._misses += 1
            return None
        self._hits += 1
        return copy.deepcopy(dict(found[0].schedule))

    def on_fallback(self, workload_key: str, target_key: str, fallback: str) -> None:
        """Warn once per (workload, target) about the fallback, or raise when strict.

        Raises:
            LogError: ``strict`` is set.
        """
        message = (
            f"no tuned schedule for workload {workload_key} on target {target_key} in "
            f"{self._source} ({self._why(workload_key, target_key)})"
        )
        if self.strict:
            raise LogError(
                f"{message}; tune it, or compile without strict mode (strict=True, --strict) "
                f"to fall back to {fallback}"
            )
        if (workload_key, target_key) in self._warned:
            return
        self._warned.add((workload_key, target_key))
        warnings.warn(f"{message}: falling back to {fallback}", HistoryMissWarning, stacklevel=3)

    def _why(self, workload_key: str, target_key: str) -> str:
        stats = self._db.stats(workload_key, target_key)
        if stats is not None:
            return f"all {stats.count} measurement(s) failed"
        others = [str(t) for t in self._db.targets(workload_key)]
        if others:
            return f"the log has it only for target(s) {', '.join(others)}"
        return f"the log has {len(self._db.workloads())} other workload(s)"
