"""Appending records to a log file and reading them back.

A log is a UTF-8 text file of JSON lines, one record per line. The writer
appends each record with one ``write`` loop on an ``O_APPEND`` descriptor (no
user-space buffer), so a killed writer leaves at most one torn last line; the
next writer first ends that line so it cannot swallow a new record. The reader
streams line by line, skips lines that are torn or not records, and reports
them in one :class:`LogWarning` per file.
"""

from __future__ import annotations

import io
import json
import os
import stat
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, cast

from compiler.errors import OutputError
from compiler.files import AtomicFile, open_input
from logs._errors import LogError
from logs._record import Record
from logs._schema import NewerVersionError, check_record, upgrade

Progress = Callable[[int, int], None]
"""``progress(bytes_done, bytes_total)``, called now and then while a file is read."""

_PROGRESS_EVERY = 65536  # lines
_SHOW_LINES = 10  # line numbers listed in a warning
MAX_LINE_BYTES = 16 << 20
"""Longest line read; a longer one is skipped as bad, read in bounded memory."""


class LogWarning(UserWarning):
    """A log was read with problems that did not stop it (skipped lines)."""


@dataclass(frozen=True)
class FileReport:
    """What reading one log file found.

    Attributes:
        path: The file.
        records: Records read.
        bad_lines: Line numbers (1-based) skipped as torn or not a record.
        first_problem: Why the first bad line was skipped, ``""`` if none.
        torn_last_line: The last line had no newline and was skipped.
    """

    path: str
    records: int
    bad_lines: tuple[int, ...]
    first_problem: str
    torn_last_line: bool


class LineScan:
    """Iterates the non-blank lines of one log file and keeps the books on them.

    Callers decode each line with :meth:`decode` (or their own fast path), call
    :meth:`bad` for lines they reject, count records in :attr:`records`, and
    call :meth:`finish` at the end.
    """

    def __init__(self, path: str | os.PathLike[str], progress: Progress | None = None) -> None:
        self.path = os.fspath(path)
        self.records = 0
        self._progress = progress
        self._bad: list[int] = []
        self._first_problem = ""
        self._torn_line = 0
        self._garbage = False  # a bad line that is not merely a torn record
        raw = open_input(self.path, "log", LogError)
        try:
            unbuffered = cast(io.BufferedReader, raw).detach()
            self._file = io.BufferedReader(cast(io.RawIOBase, unbuffered), buffer_size=1 << 20)
            self._size = os.fstat(self._file.fileno()).st_size
        except OSError as exc:
            raise LogError(f"cannot read log {self.path}: {exc.strerror}") from None

    def __iter__(self) -> Iterator[tuple[int, bytes]]:
        progress = self._progress
        lineno = 0
        limit = MAX_LINE_BYTES
        with self._file as f:
            readline = f.readline
            try:
                while line := readline(limit):
                    lineno += 1
                    if progress is not None and lineno % _PROGRESS_EVERY == 0:
                        progress(f.tell(), self._size)
                    if not line.endswith(b"\n"):
                        if len(line) >= limit:  # an overlong line: skip it, in bounded memory
                            while (rest := readline(limit)) and not rest.endswith(b"\n"):
                                pass
                            self.bad(lineno, f"longer than {limit >> 20} MiB", b"", decoded=True)
                            continue
                        self._torn_line = lineno  # only the last line can lack it
                    if line.isspace():
                        continue
                    yield lineno, line
            except OSError as exc:
                raise LogError(f"cannot read log {self.path}: {exc.strerror}") from None
        if progress is not None:
            progress(self._size, self._size)

    def bad(self, lineno: int, reason: str, line: bytes, *, decoded: bool) -> None:
        """Record that ``line`` (number ``lineno``) was skipped for ``reason``.

        ``decoded`` says the line was valid JSON (so not torn, just not a record).
        """
        self._bad.append(lineno)
        if not self._first_problem:
            self._first_problem = f"line {lineno}: {reason}"
        if decoded or not line.lstrip().startswith(b"{"):
            self._garbage = True

    def decode(self, lineno: int, line: bytes) -> dict[str, Any] | None:
        """Decode one line completely into a checked current-layout record object.

        Returns None (after :meth:`bad`) for a torn or malformed line.

        Raises:
            NewerVersionError: The line has a newer major version.
        """
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            self.bad(lineno, "not valid JSON (torn or garbage)", line, decoded=False)
            return None
        obj = self.upgrade(obj, lineno)
        problem = check_record(obj)
        if problem:
            self.bad(lineno, problem, line, decoded=True)
            return None
        return obj  # type: ignore[no-any-return]

    def upgrade(self, obj: Any, lineno: int) -> Any:
        """:func:`logs._schema.upgrade` with the file and line in the error."""
        try:
            return upgrade(obj)
        except NewerVersionError as exc:
            raise NewerVersionError(exc.version, f"file {self.path} line {lineno}") from None

    def finish(self) -> FileReport:
        """Warn once about skipped lines and return the report.

        Raises:
            LogError: No line was a record and some bad line was not merely a
                torn record: the file is not a graphtune log.
        """
        bad = tuple(self._bad)
        if bad and self.records == 0 and self._garbage:
            raise LogError(
                f"{self.path} is not a graphtune log: none of its lines is a record "
                f"({self._first_problem})"
            )
        if bad:
            shown = ", ".join(str(n) for n in bad[:_SHOW_LINES])
            more = f" and {len(bad) - _SHOW_LINES} more" if len(bad) > _SHOW_LINES else ""
            torn = (
                f"; line {self._torn_line} is a torn last line (writer interrupted?)"
                if self._torn_line in bad
                else ""
            )
            warnings.warn(
                f"{self.path}: skipped {len(bad)} unreadable line(s) at line(s) {shown}{more}"
                f"{torn}; first problem: {self._first_problem}; read {self.records} record(s)",
                LogWarning,
                stacklevel=3,
            )
        return FileReport(
            path=self.path,
            records=self.records,
            bad_lines=bad,
            first_problem=self._first_problem,
            torn_last_line=self._torn_line in bad,
        )


def read_records(path: str | os.PathLike[str]) -> Iterator[Record]:
    """Stream the records of one log file, oldest first.

    Torn and garbage lines are skipped and reported in one :class:`LogWarning`
    when the file has been read to its end. Records of the pre-release
    version 0.9 (a flat layout with numeric error codes) are upgraded to 1.0
    on the fly (``logs._schema.upgrade``; the mapping is in ``logs/README.md``);
    1.x records are read with their unknown keys kept.

    Raises:
        LogError: The file cannot be read, is not a log, or has a record of a
            newer major version (``"file X line N has record version 2.0, ..."``).
    """
    scan = LineScan(path)
    for lineno, line in scan:
        obj = scan.decode(lineno, line)
        if obj is not None:
            scan.records += 1
            yield Record._from_checked(obj)
    scan.finish()


def _repair_torn_tail(fd: int, path: str, size: int) -> None:
    """Move the unterminated last line of a log to ``<path>.torn`` and truncate it away."""
    start = size
    chunk = 1 << 16
    while start > 0:  # find the byte after the last newline, reading backwards
        lo = max(0, start - chunk)
        data = os.pread(fd, start - lo, lo)
        nl = data.rfind(b"\n")
        if nl >= 0:
            start = lo + nl + 1
            break
        start = lo
    try:
        torn_fd = os.open(f"{path}.torn", os.O_WRONLY | os.O_APPEND | os.O_CREAT
                          | getattr(os, "O_CLOEXEC", 0), 0o666)
    except OSError:
        _write_all(fd, b"\n")  # cannot keep a copy: keep the line, ended
        return
    try:
        pos = start
        while pos < size:
            data = os.pread(fd, min(chunk, size - pos), pos)
            if not data:
                break
            _write_all(torn_fd, data)
            pos += len(data)
        _write_all(torn_fd, b"\n")
        os.fsync(torn_fd)
    finally:
        os.close(torn_fd)
    os.ftruncate(fd, start)


class RecordWriter:
    """Appends records to a log file.

    Contract:
        * Each :meth:`write` is one ``os.write`` loop of one whole line on an
          ``O_APPEND`` descriptor, with no user-space buffer: when it returns the
          record is in the operating system and survives the process being
          killed. A kill during a write leaves one torn last line, which
          readers skip with a warning.
        * ``fsync`` (survives a power loss) runs at :meth:`close` and
          ``fsync_interval_s`` after a write, on a timer thread, outside the
          writers' lock: a :meth:`write` never waits for an fsync (the tuning
          driver waited ~0.6 s a run on the timer's lock; issue 20). A write made
          while the timer's fsync runs is fsynced one interval after that fsync
          ends. :meth:`flush` and :meth:`close` wait for a running timer fsync, then
          fsync themselves; a timer fsync that failed is reported by the next of
          them (:class:`LogError`).
        * Opening a file whose last line is torn repairs it: the torn bytes are
          appended to ``<log>.torn`` (kept for inspection) and cut from the log, so
          the next record starts a clean line and later reads see no bad line.
          When the ``.torn`` copy cannot be written, the line is ended with ``\n``
          instead (it stays one skipped line).
        * Thread-safe: writes from several threads are serialized.

    Example:
        >>> with RecordWriter("tune.jsonl") as out:
        ...     out.write(record)
    """

    def __init__(self, path: str | os.PathLike[str], *, fsync_interval_s: float = 2.0) -> None:
        self.path = os.fspath(path)
        self._interval = fsync_interval_s
        self._lock = threading.Lock()
        self._synced = threading.Condition(self._lock)  # a timer's fsync ended
        self._syncing = False  # a timer thread is in an fsync (outside the lock)
        self._failed: OSError | None = None  # the timer's last fsync failed (not reported)
        self._timer: threading.Timer | None = None
        self._dirty = False
        self._count = 0
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
        try:
            st = os.stat(self.path)
        except OSError:
            st = None
        if st is not None and not stat.S_ISREG(st.st_mode):
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            raise LogError(f"cannot open log {self.path} for appending: it is {kind}")
        try:
            self._fd = os.open(self.path, flags, 0o666)  # the umask applies
            size = os.fstat(self._fd).st_size
            if size and os.pread(self._fd, 1, size - 1) != b"\n":
                _repair_torn_tail(self._fd, self.path, size)
        except OSError as exc:
            raise LogError(f"cannot open log {self.path} for appending: {exc.strerror}") from None
        self._last_sync = time.monotonic()

    @property
    def count(self) -> int:
        """Records written by this writer."""
        return self._count

    def write(self, record: Record) -> None:
        """Append one record (see the class contract)."""
        data = record.to_line_bytes()  # (to_line() is these bytes decoded)
        with self._lock:
            if self._fd < 0:
                raise ValueError(f"writer for {self.path} is closed")
            try:
                _write_all(self._fd, data)
            except OSError as exc:
                raise LogError(f"cannot append to log {self.path}: {exc.strerror}") from None
            self._count += 1
            self._dirty = True
            if self._timer is None:  # the fsync is the timer's, never this thread's
                self._arm_locked()

    def write_many(self, records: Iterable[Record]) -> None:
        """Append records one by one."""
        for record in records:
            self.write(record)

    def flush(self) -> None:
        """fsync now (after the timer's, if one runs).

        Raises:
            LogError: This fsync, or a timer's since the last flush, failed.
        """
        with self._lock:
            self._synced.wait_for(lambda: not self._syncing)
            if self._fd >= 0:
                self._sync_checked()

    def close(self) -> None:
        """fsync and close; closing twice is harmless.

        Raises:
            LogError: The last fsync, or a timer's since the last flush, failed (the file
                is closed all the same).
        """
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self._synced.wait_for(lambda: not self._syncing)  # its descriptor stays open
            if self._fd >= 0:
                try:
                    self._sync_checked()
                finally:
                    os.close(self._fd)
                    self._fd = -1

    def _sync_checked(self) -> None:
        """fsync (the lock held); a failed one, or the timer's, as one LogError."""
        failed, self._failed = self._failed, None
        try:
            self._sync_locked()
        except OSError as exc:
            failed = exc
        if failed is not None:
            raise LogError(f"cannot fsync log {self.path}: {failed.strerror or failed} (its "
                           "last records may not survive a power loss)")

    def _timed_sync(self) -> None:
        """The timer's fsync, outside the lock: writes go on meanwhile (what they append
        after it started is the next timer's)."""
        with self._lock:
            self._timer = None
            if self._fd < 0 or self._syncing or not self._dirty:
                return
            self._dirty = False
            self._syncing = True
            fd = self._fd
        failed: OSError | None = None
        try:
            os.fsync(fd)
        except OSError as exc:  # reported by the next flush() or close(), never on this thread
            failed = exc
        finally:
            with self._lock:
                self._syncing = False
                self._last_sync = time.monotonic()
                self._synced.notify_all()
                if failed is not None:
                    self._dirty, self._failed = True, failed  # tried again, and reported
                elif self._dirty and self._timer is None and self._fd >= 0:
                    self._arm_locked()  # written meanwhile, its timer found this one busy

    def _arm_locked(self) -> None:
        """Start the timer that fsyncs ``fsync_interval_s`` after the last fsync."""
        elapsed = time.monotonic() - self._last_sync
        self._timer = threading.Timer(max(0.0, self._interval - elapsed), self._timed_sync)
        self._timer.daemon = True
        self._timer.start()

    def _sync_locked(self) -> None:
        if self._dirty:
            os.fsync(self._fd)
            self._dirty = False
        self._last_sync = time.monotonic()

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        try:
            self.close()
        except LogError as err:
            if exc is None:
                raise
            exc.add_note(str(err))  # the error that ended the block is the one to see


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def write_records_atomic(path: str | os.PathLike[str], records: Iterable[Record]) -> int:
    """Replace ``path`` with ``records`` atomically (:class:`compiler.files.AtomicFile`).

    Readers see either the old file or the whole new one. An existing file's
    permissions are kept; a new file gets the umask's. A directory or special
    file at ``path`` is refused.

    Returns:
        The number of records written.

    Raises:
        LogError: The path cannot be written (nothing is changed then).
    """
    try:
        out = AtomicFile(path)
    except OutputError as exc:
        raise LogError(str(exc)) from None
    count = 0
    try:
        for record in records:
            out.write(record.to_line_bytes())
            count += 1
        out.commit()
    except OutputError as exc:
        raise LogError(str(exc)) from None
    finally:
        out.discard()
    return count
