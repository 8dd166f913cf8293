"""Distill logs into a file of the best valid records per (workload, target)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from compiler.errors import OutputError
from compiler.files import check_output
from logs._database import Database, PathLike
from logs._errors import LogError
from logs._io import Progress, write_records_atomic
from logs._record import TargetKey, WorkloadInfo


@dataclass(frozen=True)
class DistillRow:
    """What distill did for one (workload, target) pair.

    Attributes:
        workload: Workload summary.
        target: Target.
        records: Records read for the pair (inputs and the existing output).
        valid: Of those, records with status ok.
        kept: Records written for the pair.
        best_latency_us: Best latency written, None if nothing was valid.
        previous_best_latency_us: Best latency the existing output had, if any.
    """

    workload: WorkloadInfo
    target: TargetKey
    records: int
    valid: int
    kept: int
    best_latency_us: float | None
    previous_best_latency_us: float | None


@dataclass(frozen=True)
class DistillSummary:
    """The result of :func:`distill`.

    Attributes:
        output: The file written.
        rows: One row per (workload, target) pair seen, sorted by key.
        records_read: Records read from inputs and the existing output.
        records_written: Records in the output now.
        merged_existing: The output existed and its records were merged in.
        skipped_lines: Lines skipped as torn or garbage, over all files.
    """

    output: str
    rows: tuple[DistillRow, ...]
    records_read: int
    records_written: int
    merged_existing: bool
    skipped_lines: int


def distill(
    inputs: Iterable[PathLike],
    output: PathLike,
    top_k: int = 1,
    *,
    progress: Progress | None = None,
) -> DistillSummary:
    """Keep the best ``top_k`` valid records per (workload, target) of ``inputs``.

    An existing ``output`` is merged in, not overwritten: the new output holds
    the best ``top_k`` of the inputs and the old output together, so running
    distill again on the same inputs, or on its own output, changes nothing.
    Records that failed are never kept; targets never mix. The output is
    replaced atomically, in key order, best first.

    Raises:
        LogError: No inputs, an unreadable or newer-version input, or an
            existing output that holds lines that are not records (it is left
            untouched rather than losing them).
    """
    paths = [os.fspath(p) for p in inputs]
    if not paths:
        raise LogError("distill needs at least one input log")
    out = os.fspath(output)
    if os.path.isdir(out):
        raise LogError(f"output {out} is a directory: give a file name")
    try:
        # The output may be an input: distill merges it rather than overwriting it.
        check_output(out)
    except OutputError as exc:
        raise LogError(str(exc)) from None
    db = Database(top_k)
    previous: Database | None = None
    if os.path.exists(out):
        previous = Database(top_k)
        report = previous.add_file(out)
        if report.bad_lines:
            raise LogError(
                f"output {out} exists and has {len(report.bad_lines)} line(s) that are not "
                f"records ({report.first_problem}); refusing to overwrite it: fix it or "
                "choose another output"
            )
        db.add_all(previous.best_records())
    for path in paths:
        db.add_file(path, progress=progress)
    written = write_records_atomic(out, db.best_records())
    rows = []
    for stats in db.all_stats():
        key = stats.workload.key
        before = previous.stats(key, stats.target) if previous is not None else None
        rows.append(
            DistillRow(
                workload=stats.workload,
                target=stats.target,
                records=stats.count,
                valid=stats.valid,
                kept=len(db.best(key, stats.target, top_k)),
                best_latency_us=stats.best_latency_us,
                previous_best_latency_us=before.best_latency_us if before else None,
            )
        )
    return DistillSummary(
        output=out,
        rows=tuple(rows),
        records_read=len(db),
        records_written=written,
        merged_existing=previous is not None,
        skipped_lines=sum(len(r.bad_lines) for r in db.reports),
    )
