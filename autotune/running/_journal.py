"""Where the studies live: Optuna's ``JournalStorage`` on a file next to the log, or a URL.

Optuna's journal file backend appends and fsyncs one line per storage
operation, and a define-by-run trial of a large model sets a few hundred
parameters: about 1.5 s of fsyncs per trial. :class:`BufferedJournalFile` keeps
the journal format and file (the dashboard and ``JournalStorage`` read it as
usual) but writes the operations of a batch in one append when the driver
calls :meth:`BufferedJournalFile.flush`. The driver's periodic flush
(``flush(wait=False)``) hands the batch to a writer thread (the append's JSON and
fsync, ~6 ms on the driver's thread before, are off it; its lines are Optuna's, byte for
byte, a created trial's many distributions joined from pieces kept per name:
:class:`autotune.running._trials.LineEncoder`); the flush at the end of a job
waits for everything to be on disk. Losing the unflushed (or not yet written) tail to
a crash costs nothing: the tuning log is the truth and
:mod:`autotune.running._reconcile` restores the study from it.

One driver owns the default journal (next to its log) at a time (an advisory
``flock`` held for its life, released by the kernel even on SIGKILL); a second
``graphtune tune`` on the same files fails at once with a clear message.

A storage named with ``--storage`` is *shared*: several drivers (``graphtune
tune`` processes with their own logs) may tune into it at once and claim
candidates through it before measuring (:mod:`autotune.running._claims`). A shared
journal file is written unbuffered by Optuna's own ``JournalFileBackend``
(multi-process safe); PostgreSQL (``postgresql://user@host/db``, through
psycopg 3) is the storage to share between hosts.
"""

from __future__ import annotations

import fcntl
import os
import re
import stat
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from compiler.errors import GraphtuneError

__all__ = [
    "BufferedJournalFile",
    "StorageHandle",
    "check_storage",
    "journal_path_for",
    "open_storage",
    "shown_url",
    "sqlalchemy_url",
    "storage_file",
]

_LOCK_GRACE_S = 5  # a lock file left by a killed writer is broken after this long


def journal_path_for(log_path: str) -> str:
    """The default journal file of a log: ``tune.jsonl`` -> ``tune.journal``."""
    root, ext = os.path.splitext(log_path)
    return (root if ext == ".jsonl" else log_path) + ".journal"


def _repair_tail(path: str) -> None:
    """Cut a torn last line (a writer killed mid-append) so later appends stay readable."""
    try:
        with open(path, "rb+") as f:
            size = f.seek(0, os.SEEK_END)
            if size == 0:
                return
            f.seek(size - 1)
            if f.read(1) == b"\n":
                return
            keep = 0
            pos = size
            while pos > 0:
                step = min(65536, pos)
                pos -= step
                f.seek(pos)
                chunk = f.read(step)
                nl = chunk.rfind(b"\n")
                if nl >= 0:
                    keep = pos + nl + 1
                    break
            f.truncate(keep)
    except FileNotFoundError:
        return


def _count_lines(path: str) -> int:
    n = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            n += chunk.count(b"\n")
    return n


class BufferedJournalFile:
    """A journal file backend that appends in batches (see the module doc).

    Implements ``optuna.storages.journal.BaseJournalBackend`` (registered as a
    virtual subclass on first use, so importing this module does not import Optuna).

    Args:
        path: The journal file (created if missing).

    Raises:
        GraphtuneError: another process holds the file.
    """

    def __init__(self, path: str) -> None:
        from optuna.storages.journal import JournalFileBackend, JournalFileSymlinkLock

        self.path = path
        try:
            self._lock_fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise GraphtuneError(f"cannot open the study journal {path}: {exc.strerror}") from None
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            raise GraphtuneError(
                f"{path} is in use by another graphtune tune: wait for it to finish, or tune "
                "into another log"
            ) from None
        _repair_tail(path)
        self._inner = JournalFileBackend(path, JournalFileSymlinkLock(path, _LOCK_GRACE_S))
        # Operations not yet in the file, oldest first: the first ``_handed`` are the writer
        # thread's to append; ``_in_file`` counts the file's. One lock keeps the two
        # consistent for readers (each operation is in the file or in the list, never both).
        self._in_file = _count_lines(path)
        self._pending: list[dict[str, Any]] = []
        self._handed = 0
        self._cv = threading.Condition()
        self._failed: BaseException | None = None
        self._closing = False
        self._writer: threading.Thread | None = None
        self._encode: Callable[[dict[str, Any]], str] | None = None  # the writer's lines

    def read_logs(self, log_number_from: int) -> Iterator[dict[str, Any]]:
        """Operations from ``log_number_from`` on: the file's, then the unwritten ones."""
        with self._cv:
            in_file = self._in_file
            tail = self._pending[max(0, log_number_from - in_file):]
        if log_number_from < in_file:  # (never reads a line the writer may be appending)
            for _, entry in zip(range(in_file - log_number_from),
                                self._inner.read_logs(log_number_from)):
                yield entry
        yield from tail

    def op_count(self) -> int:
        """The operations in the journal: the file's and the unwritten ones."""
        with self._cv:
            return self._in_file + len(self._pending)

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        """Queue operations (written by :meth:`flush`)."""
        with self._cv:
            self._pending.extend(logs)

    def flush(self, wait: bool = True) -> None:
        """Append the queued operations to the file in one write and fsync: on the writer
        thread; ``wait``: until they (and all before them) are on disk.

        Raises:
            GraphtuneError: an append failed (the disk is full...).
        """
        with self._cv:
            self._check()
            if self._handed < len(self._pending):
                self._handed = len(self._pending)
                if self._writer is None:
                    self._writer = threading.Thread(target=self._write, daemon=True,
                                                    name=f"journal {os.path.basename(self.path)}")
                    self._writer.start()
                self._cv.notify_all()
            while wait and self._handed and self._failed is None:
                self._cv.wait()
            self._check()

    def _check(self) -> None:
        if self._failed is not None:
            raise GraphtuneError(f"cannot write the study journal {self.path}: "
                                 f"{getattr(self._failed, 'strerror', None) or self._failed}")

    def _write(self) -> None:
        """The writer thread: appends what :meth:`flush` handed over until closed."""
        while True:
            with self._cv:
                while not self._handed and not self._closing:
                    self._cv.wait()
                if not self._handed:
                    return
                n = self._handed
                batch = self._pending[:n]
            try:
                self._append(batch)
            except BaseException as exc:  # noqa: BLE001 - raised in the driver's next flush
                with self._cv:
                    self._failed = exc
                    self._cv.notify_all()
                return
            with self._cv:
                del self._pending[:n]
                self._handed -= n
                self._in_file += n
                self._cv.notify_all()

    def _append(self, ops: list[dict[str, Any]]) -> None:
        """What Optuna's ``JournalFileBackend.append_logs`` does (under its file lock, one
        write and an fsync), the lines made by :class:`autotune.running._trials.LineEncoder`
        (the same bytes); Optuna's own call if its lock is not where this looks."""
        from optuna.storages.journal import _file

        lock = getattr(self._inner, "_lock", None)
        if lock is None or not hasattr(_file, "get_lock_file"):
            self._inner.append_logs(ops)
            return
        if self._encode is None:
            from autotune.running._trials import LineEncoder

            self._encode = LineEncoder()
        data = ("\n".join(map(self._encode, ops)) + "\n").encode("utf-8")
        with _file.get_lock_file(lock), open(self.path, "ab") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())

    def close(self) -> None:
        """Flush (and wait), stop the writer and release the file."""
        if self._lock_fd < 0:
            return
        try:
            self.flush()
        finally:
            with self._cv:
                self._closing = True
                self._cv.notify_all()
            if self._writer is not None:
                self._writer.join()
            os.close(self._lock_fd)
            self._lock_fd = -1


def _register() -> None:
    from optuna.storages.journal import BaseJournalBackend

    BaseJournalBackend.register(BufferedJournalFile)
    _memo_distributions()


def _memo_distributions() -> None:
    """Make a journal storage convert a parameter's distribution to and from JSON once.

    Optuna's journal writes every new trial's distributions as JSON and reads them back
    when it applies its own log: on a 74-parameter GPT block that was ~3 ms of the
    driver's CPU per trial, every one the same few dozen strings. The conversions are
    pure, so the journal module's two names are replaced by memoised ones (bounded): JSON
    to a distribution by the text, a distribution to JSON by the object
    (:func:`_by_identity`), never by value: equal distributions may write different JSON
    (choices ``(False, True)`` equal ``(0, 1)``: a by-value cache wrote the first one met
    for both), and a by-value hit (~5 us: the choices compared element by element) cost
    more than converting (~3 us). Once per process.
    """
    import functools

    from optuna.storages.journal import _storage

    if getattr(_storage.json_to_distribution, "cache_info", None) is not None:
        return
    _storage.json_to_distribution = functools.lru_cache(maxsize=8192)(  # type: ignore[attr-defined]
        _storage.json_to_distribution)
    _storage.distribution_to_json = _by_identity(  # type: ignore[attr-defined]
        _storage.distribution_to_json)


def _by_identity(to_json: Callable[[Any], str]) -> Callable[[Any], str]:
    """``to_json`` remembered by the distribution object itself, before its value.

    An lru cache hashes and compares a distribution by value: a categorical's hash and
    ``==`` walk its whole ``choices`` tuple, element by element, for each of a trial's
    parameters (74 x ~18 choices on a GPT block: with an lru cache alone,
    ``create_new_trial`` took 0.87 ms of the driver's CPU per trial, 0.09 ms with this;
    ``bench/results/tuning.md``). The driver passes the same distribution objects every time
    (``Driver._distributions``), so the object's id finds them first (its entry keeps
    the object alive, so the id is not reused); anything else is converted.
    """
    seen: dict[int, tuple[Any, str]] = {}

    def memo(dist: Any) -> str:
        hit = seen.get(id(dist))
        if hit is not None and hit[0] is dist:
            return hit[1]
        text = to_json(dist)
        if len(seen) >= 8192:
            seen.clear()
        seen[id(dist)] = (dist, text)
        return text

    return memo


@dataclass
class StorageHandle:
    """An Optuna storage and what to do at batch ends and at the end.

    Attributes:
        storage: What ``optuna.create_study(storage=...)`` takes.
        where: For messages: the journal path or the URL (as the user gave it).
        journal: The buffered journal, when the storage is one.
        shared: Several drivers may use the storage at once: candidates are claimed
            through it before they are measured (see :mod:`autotune.running._claims`).
        path: The file of a journal or SQLite storage ("" for a server database).
    """

    storage: Any
    where: str
    journal: BufferedJournalFile | None = None
    shared: bool = False
    path: str = ""
    lock_fd: int = -1  # a shared journal's LOCK_SH (keeps a private driver off the file)

    def flush(self, wait: bool = True) -> None:
        """Make the study's state since the last flush durable (journal only); ``wait``:
        block until it is (otherwise the journal's writer thread appends it)."""
        if self.journal is not None:
            self.journal.flush(wait)

    def close(self) -> None:
        """Flush and release (released when the flush fails too)."""
        try:
            if self.journal is not None:
                self.journal.close()
        finally:
            if self.lock_fd >= 0:
                os.close(self.lock_fd)
                self.lock_fd = -1


def open_storage(spec: str | None, log_path: str) -> StorageHandle:
    """The study storage: ``spec`` is None (a journal next to the log, private to it),
    an Optuna URL (``postgresql://...``, ``sqlite:///studies.db``) or a journal file
    path; the last two are shared (see the module doc).

    Raises:
        GraphtuneError: the storage cannot be opened (checked before anything starts).
    """
    from autotune.running._trials import journal_storage

    _register()
    if spec is None:
        path = journal_path_for(log_path)
        journal = BufferedJournalFile(path)
        try:
            storage = journal_storage(journal)  # JournalStorage, trials made cheaply
        except Exception as exc:  # noqa: BLE001 - a damaged journal raises many kinds
            journal.close()
            raise GraphtuneError(f"{path} is not an Optuna journal ({exc})") from None
        return StorageHandle(storage, path, journal, path=path)
    check_storage(spec, outputs=[("the tuning log", log_path)])
    if "://" not in spec:
        return _shared_journal(spec)
    from optuna.storages import RDBStorage

    url = sqlalchemy_url(spec)
    try:
        storage = RDBStorage(url)
    except Exception as exc:  # noqa: BLE001 - SQLAlchemy raises many kinds for a bad URL
        raise GraphtuneError(storage_error(spec, exc)) from None
    local = storage_file(spec)
    return StorageHandle(storage, shown_url(spec), shared=True,
                         path=os.path.realpath(local) if local else "")


def storage_error(spec: str, exc: BaseException) -> str:
    """The one-line message for a storage that did not open (no password in it)."""
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    why = lines[0] if lines else type(exc).__name__
    if "file is not a database" in why:
        why = f"{storage_file(spec)} is not an SQLite database"
    return hide_password(f"cannot open the study storage {shown_url(spec)}: {why}", spec)


def shown_url(spec: str) -> str:
    """A storage URL fit to print: its password replaced by ``***``."""
    try:
        from sqlalchemy.engine import make_url

        return make_url(spec).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - not a URL SQLAlchemy parses: hide what looks like one
        return _USERINFO.sub(r"\1***@", spec)


# ``scheme://user:password@`` in a URL SQLAlchemy cannot parse (``...@[::1/db``).
_USERINFO = re.compile(r"(://[^:/@]*:)[^@]*@")


def hide_password(text: str, spec: str) -> str:
    """``text`` (an error message about ``spec``) with ``spec``'s password replaced by ``***``."""
    m = re.search(r"://[^:/@]*:([^@]*)@", spec)
    return text.replace(m.group(1), "***") if m and m.group(1) else text


def storage_file(spec: str) -> str:
    """The local file a storage spec keeps its studies in: a journal path, or an SQLite
    URL's database path without its ``?query``; "" for a server database or memory."""
    if "://" not in spec:
        return spec
    if not spec.startswith("sqlite:"):
        return ""
    path = spec.split(":///", 1)[1] if ":///" in spec else ""
    path = path.split("?", 1)[0]
    return "" if path in ("", ":memory:") else path


def check_storage(spec: str, *, inputs: Iterable[str | None] = (),
                  outputs: Iterable[tuple[str, str]] = ()) -> None:
    """Refuse a storage that cannot hold studies, before anything is created.

    Args:
        spec: ``--storage`` as given (a journal file or a URL).
        inputs: The command's input files, which the storage may not be.
        outputs: ``(what, path)`` of the command's outputs (``("the tuning log", log)``),
            which the storage may not be either: both would write one file.

    Raises:
        GraphtuneError: an empty spec, or a study file that is a directory, a device,
            a FIFO or socket (reading ``/dev/zero`` as a journal never ends), one of
            the command's files, or in a missing directory.
    """
    from compiler.files import same_file

    if not spec.strip():
        raise GraphtuneError("--storage is empty: give a journal file or a database URL")
    path = storage_file(spec)
    if not path:
        return
    shown = shown_url(spec)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise GraphtuneError(f"cannot use {shown} as the study storage: "
                             f"{exc.strerror or type(exc).__name__}") from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise GraphtuneError(f"cannot use {shown} as the study storage: {path} is not a regular "
                             "file: give a file in an existing directory")
    for what, out in outputs:
        if out and (same_file(path, out) or os.path.abspath(path) == os.path.abspath(out)):
            raise GraphtuneError(f"cannot use {shown} as the study storage: it is {what} of this "
                                 "command; give another file")
    for inp in inputs:
        if inp and same_file(path, inp):
            raise GraphtuneError(f"cannot use {shown} as the study storage: it is an input of "
                                 f"this command ({inp}); give another file")
    parent = os.path.dirname(path) or "."
    if not os.path.isdir(parent):
        raise GraphtuneError(f"cannot use {shown} as the study storage: directory {parent} "
                             "does not exist")


def _shared_journal(path: str) -> StorageHandle:
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend, JournalFileOpenLock

    parent = os.path.dirname(path) or "."
    if os.path.isdir(path) or not os.path.isdir(parent):
        raise GraphtuneError(f"cannot use {path} as the study journal: give a file in an "
                             "existing directory")
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise GraphtuneError(f"cannot open the study journal {path}: {exc.strerror}") from None
    try:
        # Shared drivers hold LOCK_SH together; a private driver (LOCK_EX, buffered
        # appends) on the same file would corrupt their view, and they its.
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise GraphtuneError(f"{path} is the private journal of a running graphtune tune: "
                             "wait for it, or share another file") from None
    try:
        backend = JournalFileBackend(path, JournalFileOpenLock(path, _LOCK_GRACE_S))
        storage = JournalStorage(backend)
    except Exception as exc:  # noqa: BLE001 - a damaged journal raises many kinds
        os.close(fd)
        raise GraphtuneError(f"{path} is not an Optuna journal ({exc})") from None
    # The claims file goes beside the real journal: jobs reaching it through different
    # symbolic links must share one.
    return StorageHandle(storage, path, shared=True, path=os.path.realpath(path), lock_fd=fd)


_PG_DRIVERS = (("psycopg", "postgresql+psycopg"), ("psycopg2", "postgresql+psycopg2"),
               ("pg8000", "postgresql+pg8000"))


def sqlalchemy_url(spec: str) -> str:
    """``spec`` with a plain ``postgresql://`` (or ``postgres://``) scheme mapped to an
    installed driver (psycopg 3 first) and, for libpq drivers, a 10 s ``connect_timeout``
    unless the URL sets one; other URLs unchanged.

    Raises:
        GraphtuneError: a PostgreSQL URL and no PostgreSQL driver is installed.
    """
    import importlib.util

    scheme, sep, rest = spec.partition("://")
    if scheme in ("postgresql", "postgres"):
        for module, dialect in _PG_DRIVERS:
            if importlib.util.find_spec(module) is not None:
                return _with_connect_timeout(f"{dialect}{sep}{rest}")
        raise GraphtuneError("a PostgreSQL storage needs a driver: pip install 'psycopg[binary]'")
    return _with_connect_timeout(spec) if scheme in _LIBPQ_SCHEMES else spec


_LIBPQ_SCHEMES = ("postgresql+psycopg", "postgresql+psycopg2")
PG_CONNECT_TIMEOUT_S = 10


def _with_connect_timeout(url: str) -> str:
    """A libpq URL with ``connect_timeout`` (:data:`PG_CONNECT_TIMEOUT_S`) unless it sets
    one: a host that accepts the connection and never answers would hang the job."""
    from sqlalchemy.engine import make_url

    try:
        u = make_url(url)
    except Exception:  # noqa: BLE001 - a URL SQLAlchemy cannot parse fails where it opens
        return url
    if "connect_timeout" in u.query:
        return url
    return u.update_query_dict({"connect_timeout": str(PG_CONNECT_TIMEOUT_S)}) \
        .render_as_string(hide_password=False)
