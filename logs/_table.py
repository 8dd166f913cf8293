"""A log as rows: one flat dict per record, for ``log show --csv/--json`` and pandas.

Every row has the keys of :data:`ROW_FIELDS`, in that order:

=====================  ==========================================================
``task``               ``<model>@b<batch>`` (the tuner's task of the workload)
``workload``           the workload key
``target``             ``<chip>:<target hash>``
``candidate``          12 hex digits of the schedule's SHA-256 (the same schedule
                       always has the same candidate, in any log)
``status``             ``ok`` or the error status
``latency_us``         measured latency (empty for an error)
``throughput_per_s``   measured throughput (empty for an error)
``latency_over_bound`` latency / the roofline lower bound of the task, >= 1 (the
                       record's ``result.lower_bound_us``, written by every tune and
                       ``simulate --log`` since record version 1.2); empty for an
                       error or an older record
``tuner``              the sampler that proposed it
``trial``              its trial number in the study (empty if none)
``time_utc``           ISO 8601 time of the measurement
``error``              the error message (empty when ``ok``)
=====================  ==========================================================
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from typing import Any

from logs._errors import LogError
from logs._io import read_records
from logs._record import Record

ROW_FIELDS = ("task", "workload", "target", "candidate", "status", "latency_us",
              "throughput_per_s", "latency_over_bound", "tuner", "trial", "time_utc", "error")


def record_row(rec: Record) -> dict[str, Any]:
    """The row of one record (see the module docstring)."""
    res = rec.result
    bound = res.lower_bound_us
    ratio = (res.latency_us / bound if res.latency_us is not None and bound else None)
    cand = hashlib.sha256(json.dumps(dict(rec.schedule), sort_keys=True, separators=(",", ":"))
                          .encode()).hexdigest()[:12]
    when = datetime.datetime.fromtimestamp(rec.prov.time_unix_s, tz=datetime.UTC)
    return {
        "task": f"{rec.workload.model or '?'}@b{rec.workload.batch}",
        "workload": rec.workload.key,
        "target": f"{rec.target.chip}:{rec.target.hash}",
        "candidate": cand,
        "status": res.status.value,
        "latency_us": res.latency_us,
        "throughput_per_s": res.throughput_per_s,
        "latency_over_bound": ratio,
        "tuner": rec.prov.tuner,
        "trial": rec.prov.trial,
        "time_utc": when.isoformat(timespec="seconds").replace("+00:00", "Z"),
        "error": res.error,
    }


def iter_records(files: Iterable[str | os.PathLike[str]], top: int | None = None) -> Iterator[Record]:
    """The records of ``files`` in file order, or the ``top`` best per (workload, target).

    With ``top``, the K best valid records of each pair come out best first (the
    order of :meth:`Record.rank_key`), pairs in the order first seen.
    """
    if top is None:
        for f in files:
            yield from read_records(f)
        return
    if top < 1:
        raise LogError(f"--top must be >= 1, got {top}")
    groups: dict[tuple[str, Any], list[Record]] = {}
    for f in files:
        for rec in read_records(f):
            if rec.is_valid:
                groups.setdefault((rec.workload_key, rec.target), []).append(rec)
    for recs in groups.values():
        yield from sorted(recs, key=lambda r: r.rank_key())[:top]


def rows(files: Iterable[str | os.PathLike[str]], top: int | None = None) -> Iterator[dict[str, Any]]:
    """:func:`record_row` of every record :func:`iter_records` yields."""
    for rec in iter_records(files, top):
        yield record_row(rec)


def to_dataframe(files: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
                 top: int | None = None) -> Any:
    """The records of one or more logs as a pandas DataFrame (columns :data:`ROW_FIELDS`).

    pandas is not a dependency of graphtune: this raises :class:`LogError` naming
    it when it is not installed. ``time_utc`` is a timezone-aware datetime column.

    Example:
        >>> df = logs.to_dataframe("tune.jsonl")
        >>> df[df.status == "ok"].groupby("task").latency_us.min()
    """
    try:
        import pandas as pd
    except ImportError:
        raise LogError("logs.to_dataframe needs pandas: pip install pandas") from None
    paths = [files] if isinstance(files, str | os.PathLike) else list(files)
    df = pd.DataFrame(list(rows(paths, top)), columns=list(ROW_FIELDS))
    df["time_utc"] = pd.to_datetime(df["time_utc"], utc=True)
    return df
