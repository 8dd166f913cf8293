"""What ``graphtune tune`` says before it starts: durations, the log's state, worker counts.

Everything here imports only :mod:`logs` and the standard library, so the first
line (what the log already holds) comes before TVM or Ray load.
"""

from __future__ import annotations

import os
import re

from compiler.errors import GraphtuneError

_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*(ms|h|m|s)?", re.IGNORECASE)
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, None: 1.0}


def process_started(entered: float) -> float:
    """``time.monotonic()`` when this process started (Linux: from ``/proc``), so that a
    time budget counts the interpreter's start and the CLI's imports (a second or two,
    more on a loaded machine); ``entered`` (when the command was entered) elsewhere, and
    when the process is older than a start takes (a command run inside a long-lived
    process, as by click's test runner)."""
    import time

    now = time.monotonic()
    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22: starttime
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        age = uptime - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return entered
    started = now - age
    return started if 0 <= entered - started < _START_S else entered


_START_S = 30.0  # a process this much older than its command was not started for it


def parse_duration(text: str, option: str = "--time-budget") -> float:
    """Seconds of ``"10m"``, ``"20s"``, ``"1h30m"``, ``"90"`` (seconds) or ``"2.5m"``.

    Raises:
        GraphtuneError: Not a positive duration.
    """
    t = text.strip().replace(" ", "")
    pos, total, parts = 0, 0.0, 0
    while pos < len(t):
        m = _DURATION.match(t, pos)
        if m is None or m.end() == pos:
            break
        unit = m.group(2).lower() if m.group(2) else None
        total += float(m.group(1)) * _UNIT_S[unit]
        pos = m.end()
        parts += 1
        if unit is None:
            break
    if not parts or pos != len(t) or not 0 < total < float("inf"):
        raise GraphtuneError(f"{option} {text!r}: give a positive duration such as 20s, 10m, "
                             "1h30m or 90 (seconds)")
    return total


def log_state(log_path: str) -> str:
    """One phrase on what ``log_path`` holds: ``"a new log"`` or ``"resuming: 600 records, ..."``.

    Reads the records (no TVM): their count and the best latency of each model
    at each batch. A log that cannot be read is left to ``tune``'s own checks.
    """
    import warnings

    from logs import LogError, read_records

    if not os.path.exists(log_path) or os.path.getsize(log_path) == 0:
        return "a new log"
    count = 0
    best: dict[str, float] = {}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tune reports torn lines itself
            for rec in read_records(log_path):
                count += 1
                lat = rec.result.latency_us
                if rec.result.is_valid and lat is not None:
                    key = f"{rec.workload.model or '?'}@b{rec.workload.batch}"
                    best[key] = min(best.get(key, lat), lat)
    except (LogError, OSError):
        return "a log tune will check"
    if not count:
        return "a log with no records"
    shown = ", ".join(f"best {v:,.1f} µs ({k})" for k, v in sorted(best.items())[:4])
    more = f" and {len(best) - 4} more" if len(best) > 4 else ""
    return f"resuming: {count:,} records" + (f", {shown}{more}" if shown else ", none ok")


def workers_warning(workers: int | None) -> str | None:
    """A warning when more Ray workers than CPUs are asked for, else None."""
    cpus = os.cpu_count() or 1
    try:
        cpus = len(os.sched_getaffinity(0)) or cpus
    except (AttributeError, OSError):
        pass
    if workers is not None and workers > cpus:
        return (f"--workers {workers} on {cpus} CPU(s): the workers share the CPUs, so "
                f"measurements are not faster than with --workers {cpus}")
    return None


# ---- a finished job, answered from the log without TVM or Ray ---------------------------------
def summary_path_for(log_path: str) -> str:
    """``tune.jsonl`` -> ``tune.summary.json``: the last finished job's summary."""
    root, ext = os.path.splitext(log_path)
    return (root if ext == ".jsonl" else log_path) + ".summary.json"


def job_fingerprint(model_paths: list[str], options: dict[str, object]) -> dict[str, object]:
    """What makes a job the same job: the model files' bytes and the options that change tasks."""
    import hashlib

    files = []
    for p in model_paths:
        if not os.path.isfile(p):  # missing, or a directory: the import says what it is
            files.append({"path": os.path.abspath(p), "sha256": None})
            continue
        h = hashlib.sha256()
        with open(p, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        files.append({"path": os.path.abspath(p), "sha256": h.hexdigest()})
    return {"models": files, **options}


def save_summary(log_path: str, fingerprint: dict[str, object], task_keys: list[str],
                 text: str, result_json: dict[str, object]) -> None:
    """Record a finished job's summary next to its log (a failure to write is no error)."""
    import contextlib
    import json

    from compiler.files import write_atomic

    data = {"fingerprint": fingerprint, "tasks": task_keys, "text": text, "json": result_json}
    with contextlib.suppress(OSError, GraphtuneError):
        write_atomic(summary_path_for(log_path), json.dumps(data).encode())


def finished_summary(log_path: str, fingerprint: dict[str, object],
                     trials: int) -> tuple[int, dict[str, object]] | None:
    """``(records, saved summary)`` when this job finished before and its log holds ``trials``
    records of its tasks; None otherwise (then tune as usual)."""
    import json
    import warnings

    from logs import LogError, read_records

    try:
        with open(summary_path_for(log_path), encoding="utf-8") as f:
            saved = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(saved, dict) or saved.get("fingerprint") != fingerprint:
        return None
    keys = set(saved.get("tasks") or ())
    if not keys or not os.path.exists(log_path):
        return None
    target = fingerprint.get("target_hash")
    count = 0
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for rec in read_records(log_path):
                if rec.workload.key in keys and rec.target.hash == target:
                    count += 1
    except (LogError, OSError):
        return None
    return (count, saved) if count >= trials else None
