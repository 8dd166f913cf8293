"""Running one fuzz case: the CLI in-process, bounded in time and memory, checked for cleanliness.

Every case must end with exit status 0 (the input happened to be fine), 1
(``simulate`` only: the schedule overflows memory) or 2 with exactly one
``graphtune: error:`` line on stderr; never a traceback, never a hang (each
case has a wall-clock limit, enforced with ``SIGALRM``), never a memory spike
(the peak resident set of the process is reset before each case through
``/proc/self/clear_refs`` and read back after it).
"""

from __future__ import annotations

import contextlib
import re
import signal
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from click.testing import CliRunner, Result

from autotune.cli import main

CASE_SECONDS = 30.0
"""Wall-clock limit of one case (a loaded 2-core machine; typical cases take milliseconds)."""
CASE_MEMORY_MB = 400.0
"""Peak resident memory a case may add (TVM's first import of a model needs ~150 MB)."""
PROGRESS = re.compile(r"^graphtune: (?!error: |warning: ).* \(\d+ s\)$")
# ``graphtune tune``'s line per batch off a terminal (the job's progress, not an outcome).
TUNE_PROGRESS = re.compile(r"^tune: \d+/\d+ measured, ")
_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


class Hang(BaseException):  # noqa: N818 - not an Exception: no handler in graphtune may swallow it
    """A case ran past :data:`CASE_SECONDS`."""


@dataclass
class Stats:
    """What the fuzz suite ran (printed at the end of a session without xdist)."""

    files: Counter[str] = field(default_factory=Counter)  # kind -> generated or corpus files
    cases: Counter[str] = field(default_factory=Counter)  # kind -> CLI runs
    accepted: Counter[str] = field(default_factory=Counter)  # kind -> files that were fine
    exits: Counter[int] = field(default_factory=Counter)
    slowest_s: float = 0.0
    slowest: str = ""
    peak_mb: float = 0.0
    peak: str = ""
    started: float = field(default_factory=time.perf_counter)


STATS = Stats()


def _kb(key: str) -> float:
    for line in _STATUS.read_text().splitlines():
        if line.startswith(key):
            return float(line.split()[1])
    return 0.0


@contextlib.contextmanager
def bounded(label: str, seconds: float = CASE_SECONDS) -> Iterator[None]:
    """Run the block with a time limit and measure the memory it adds to the process."""
    measure = _STATUS.exists()
    if measure:
        with contextlib.suppress(OSError):
            _CLEAR_REFS.write_text("5")  # reset the peak resident set (VmHWM)
        base = _kb("VmRSS:")

    def alarm(signum: int, frame: object) -> None:
        raise Hang(f"{label}: still running after {seconds:.0f} s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    t0 = time.perf_counter()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    elapsed = time.perf_counter() - t0
    if elapsed > STATS.slowest_s:
        STATS.slowest_s, STATS.slowest = elapsed, label
    if measure:
        added = (_kb("VmHWM:") - base) / 1024
        if added > STATS.peak_mb:
            STATS.peak_mb, STATS.peak = added, label
        assert added < CASE_MEMORY_MB, f"{label}: the case added {added:.0f} MB of memory"


def run_cli(kind: str, *args: object, allowed: tuple[int, ...] = (0, 2)) -> Result:
    """Run ``graphtune ARGS`` in-process as one case of ``kind`` and check it ended cleanly."""
    argv = [str(a) for a in args]
    label = f"{kind}: graphtune {' '.join(a[:80] for a in argv)}"
    with bounded(label):
        r = CliRunner().invoke(main, argv)
    STATS.cases[kind] += 1
    STATS.exits[r.exit_code] += 1
    check_clean(r, allowed, label)
    return r


def check_clean(r: Result, allowed: tuple[int, ...], label: str) -> None:
    """Exit status allowed; no traceback; exit 2 is exactly one ``graphtune: error:`` line.

    Progress lines (off a terminal, after 5 s) and ``graphtune: warning:`` lines may
    come before it; nothing else may.
    """
    assert r.exception is None or isinstance(r.exception, SystemExit), (
        f"{label}: raised {r.exception!r}")
    assert r.exit_code in allowed, (label, r.exit_code, r.stderr[-2000:])
    assert "Traceback" not in r.output, (label, r.output[-2000:])
    lines = [ln for ln in r.stderr.splitlines()
             if ln.strip() and not PROGRESS.match(ln) and not TUNE_PROGRESS.match(ln)]
    # Besides the outcome line, only one-line warnings (a log's skipped lines) and
    # notes (random inputs) may appear.
    said = [ln for ln in lines if not ln.startswith(("graphtune: warning: ", "note: "))]
    if r.exit_code == 2:
        assert len(said) == 1 and said[0].startswith("graphtune: error: "), (label, r.stderr)
    elif r.exit_code == 1:
        assert len(said) == 1 and said[0].startswith("graphtune: schedule does not fit"), (
            label, r.stderr)
    else:
        assert not said, (label, r.stderr)


def leftovers(directory: Path) -> list[str]:
    """Temporary files a write left behind (the atomic writer's are ``.NAME.XXXXXXXX.tmp``)."""
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def summary() -> str:
    files = sum(STATS.files.values())
    runs = sum(STATS.cases.values())
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(STATS.files.items()))
    good = ", ".join(f"{k} {n}" for k, n in sorted(STATS.accepted.items()))
    exits = ", ".join(f"exit {k}: {n}" for k, n in sorted(STATS.exits.items()))
    return (f"fuzz: {files} files ({kinds}) in {runs} CLI runs, "
            f"{time.perf_counter() - STATS.started:.1f} s; {exits}; accepted and used further: "
            f"{good or 'none'}; slowest run {STATS.slowest_s:.2f} s ({STATS.slowest[:90]}); "
            f"most memory added {STATS.peak_mb:.0f} MB ({STATS.peak[:90]})")


def fresh_dir(root: Path, name: str) -> Path:
    """A new empty directory under ``root`` (hypothesis examples cannot use tmp_path)."""
    n = 0
    while (d := root / f"{name}-{n}").exists():
        n += 1
    d.mkdir()
    return d


def remove_tree(d: Path) -> None:
    for p in sorted(d.rglob("*"), key=lambda q: len(q.parts), reverse=True):
        with contextlib.suppress(OSError):
            if p.is_dir() and not p.is_symlink():
                p.rmdir()
            else:
                p.unlink()
    with contextlib.suppress(OSError):
        d.rmdir()


