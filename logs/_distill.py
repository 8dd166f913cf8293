"""Distill logs into a file of the best valid records per (workload, target).

Logs from a farm (one per driver or host) go in as files, directories (their
``*.jsonl``) or glob patterns (:func:`expand_inputs`); the summary says per
workload how many records each input gave. Targets are ranked apart always;
``targets`` says whether one output file may hold several.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable, Sequence
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
class InputRow:
    """How many records one input gave one (workload, target) pair.

    Attributes:
        path: The input file.
        workload: Workload summary.
        target: Target.
        records: Records of the pair in that file.
    """

    path: str
    workload: WorkloadInfo
    target: TargetKey
    records: int


@dataclass(frozen=True)
class DistillSummary:
    """The result of :func:`distill`.

    Attributes:
        output: The output asked for.
        rows: One row per (workload, target) pair seen, sorted by key.
        records_read: Records read from inputs and the existing output(s).
        records_written: Records in the output(s) now.
        merged_existing: An output existed and its records were merged in.
        skipped_lines: Lines skipped as torn or garbage, over all files.
        outputs: The files written (``output`` itself, or one per target with
            ``targets="split"``).
        inputs: Per input file and pair, the records it gave, in input then key order.
    """

    output: str
    rows: tuple[DistillRow, ...]
    records_read: int
    records_written: int
    merged_existing: bool
    skipped_lines: int
    outputs: tuple[str, ...] = ()
    inputs: tuple[InputRow, ...] = ()

_GLOB_CHARS = frozenset("*?[")


def expand_inputs(paths: Sequence[PathLike], exclude: Sequence[PathLike] = ()) -> list[str]:
    """Input logs named by files, directories (their ``*.jsonl``, sorted) or glob patterns.

    Each file once, in the order given. Paths in ``exclude`` (an output) are left out
    of what a directory or pattern finds; a file named explicitly stays an input, so
    ``distill log.jsonl -o log.jsonl`` distills a log in place.

    Raises:
        LogError: a path that does not exist, or a directory or pattern that names no log.
    """
    skip = {os.path.realpath(os.fspath(p)) for p in exclude}
    out: list[str] = []
    seen: set[str] = set()
    for p in (os.fspath(x) for x in paths):
        if os.path.isdir(p):
            found = sorted(glob.glob(os.path.join(glob.escape(p), "*.jsonl")))
            where = f"directory {p} holds no *.jsonl log"
        elif not os.path.exists(p) and _GLOB_CHARS & set(p):
            found = sorted(f for f in glob.glob(p) if os.path.isfile(f))
            where = f"no log matches {p}"
        else:
            found, where = [p], ""
        if where:
            found = [f for f in found if os.path.realpath(f) not in skip]
        if not found and where:
            raise LogError(f"{where}: give log files, a directory of logs or a pattern")
        for f in found:
            real = os.path.realpath(f)
            if real not in seen:
                seen.add(real)
                out.append(f)
    return out


def target_output(output: PathLike, target: TargetKey) -> str:
    """The output of one target with ``targets="split"``: ``best.jsonl`` ->
    ``best.<chip>-<hash[:8]>.jsonl``."""
    root, ext = os.path.splitext(os.fspath(output))
    return f"{root}.{target.chip}-{target.hash[:8]}{ext or '.jsonl'}"


def distill(
    inputs: Iterable[PathLike],
    output: PathLike,
    top_k: int = 1,
    *,
    progress: Progress | None = None,
    targets: str = "together",
) -> DistillSummary:
    """Keep the best ``top_k`` valid records per (workload, target) of ``inputs``.

    An existing output is merged in, not overwritten: the new output holds
    the best ``top_k`` of the inputs and the old output together, so running
    distill again on the same inputs, or on its own output, changes nothing.
    Records that failed are never kept; targets are ranked apart. The output is
    replaced atomically, in key order, best first.

    Args:
        inputs: Log files (see :func:`expand_inputs` for directories and patterns).
        output: The distilled log.
        top_k: Records to keep per (workload, target).
        progress: Called while reading.
        targets: ``"together"``: one output may hold records of several targets;
            ``"one"``: refuse (before writing) when it would; ``"split"``: one output per
            target, named by :func:`target_output`.

    Raises:
        LogError: No inputs, an unreadable or newer-version input, several targets
            with ``targets="one"``, or an existing output that holds lines that are not
            records (it is left untouched rather than losing them).
    """
    if targets not in ("together", "one", "split"):
        raise ValueError(f"targets must be together, one or split, got {targets!r}")
    paths = [os.fspath(p) for p in inputs]
    if not paths:
        raise LogError("distill needs at least one input log")
    out = os.fspath(output)
    if os.path.isdir(out):
        raise LogError(f"output {out} is a directory: give a file name")
    if targets == "split" and os.path.lexists(out) and not os.path.isfile(out):
        # The outputs are named after it: -o /dev/null would write files into /dev.
        raise LogError(f"output {out} is not a regular file: give a file name (each target's "
                       "output is named after it)")
    db = Database(top_k)
    counted: dict[tuple[str, str, str], int] = {}
    in_rows: list[InputRow] = []
    for path in paths:
        db.add_file(path, progress=progress)
        for stats in db.all_stats():
            pair = (stats.workload.key, stats.target.chip, stats.target.hash)
            if stats.count > counted.get(pair, 0):
                in_rows.append(InputRow(path, stats.workload, stats.target,
                                        stats.count - counted.get(pair, 0)))
                counted[pair] = stats.count
    kept_targets = sorted({r.target for r in db.best_records()}, key=str)
    if targets == "one" and len(kept_targets) > 1:
        names = ", ".join(f"{t.chip}:{t.hash[:8]}" for t in kept_targets)
        raise LogError(f"the inputs hold records of {len(kept_targets)} targets ({names}): "
                       "distill each target into its own file with --per-target")
    outs = [target_output(out, t) for t in kept_targets] if targets == "split" else [out]
    previous: Database | None = None
    for o in outs:
        try:
            # The output may be an input: distill merges it rather than overwriting it.
            check_output(o)
        except OutputError as exc:
            raise LogError(str(exc)) from None
        if not os.path.exists(o):
            continue
        previous = previous or Database(top_k)
        report = previous.add_file(o)
        if report.bad_lines:
            raise LogError(
                f"output {o} exists and has {len(report.bad_lines)} line(s) that are not "
                f"records ({report.first_problem}); refusing to overwrite it: fix it or "
                "choose another output"
            )
    if previous is not None:
        if targets == "one":
            mixed = {r.target for r in previous.best_records()} | set(kept_targets)
            if len(mixed) > 1:
                raise LogError(f"output {out} holds records of another target than the inputs: "
                               "choose another output, or distill with --per-target")
        db.add_all(previous.best_records())
    if targets == "split":
        written = sum(write_records_atomic(o, (r for r in db.best_records() if r.target == t))
                      for o, t in zip(outs, kept_targets))
    else:
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
        outputs=tuple(outs),
        inputs=tuple(in_rows),
    )
