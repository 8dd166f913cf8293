"""The one way graphtune writes and reads the files a user names.

Writing (:class:`AtomicFile`, :func:`write_atomic`): every output is written to
a temporary file in the target's own directory, flushed and fsynced, and
renamed onto the target only when complete, so a reader (or a crash) sees the
old file or the whole new one, never a part. The rename only ever replaces a
regular file or takes a new name: a directory, a device, a FIFO or a socket at
the output path is refused, as is an output that is also an input of the same
command (``compile m.onnx -o m.onnx``). A symbolic link to a regular file is
followed (the file it points to is replaced, the link is kept); a dangling link
is refused. New files get ``0o666`` minus the umask, as ``open()`` would give
them; a replaced file keeps its mode.

:func:`check_output` runs the same checks (and proves the directory writable)
without writing anything: commands call it for every output before they start
work, so a bad ``-o`` fails in a second rather than after a long build.

Reading (:func:`read_bounded`): input files are read with a size limit and must
be regular files or pipes (a device such as ``/dev/zero`` would never end).

Only the standard library is used: ``logs`` imports this module too.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import IO

from compiler.errors import GraphtuneError, OutputError

PathLike = str | os.PathLike[str]
_TEMP_NAME_CHARS = 80  # of the target's name in the temp file's name (NAME_MAX is 255)


def _kind(mode: int) -> str:
    """A phrase for a file type that is not a regular file."""
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISLNK, "a symbolic link"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _why(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def same_file(a: PathLike, b: PathLike) -> bool:
    """Whether two paths name one file (hard links and symlinks included)."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        try:
            return os.path.realpath(a) == os.path.realpath(b)
        except (OSError, ValueError):
            return False


def _resolve(path: PathLike) -> tuple[Path, os.stat_result | None]:
    """The file an output really goes to, and its stat (None: a new path).

    Raises:
        OutputError: The path is empty, a dangling link, or cannot be examined.
    """
    text = os.fspath(path)
    if not text:
        raise OutputError("an output path is empty: give a file name")
    if "\x00" in text:
        raise OutputError(f"cannot write {text!r}: a file name cannot contain a NUL byte")
    try:
        st = os.lstat(text)
    except FileNotFoundError:
        return Path(text), None
    except OSError as exc:
        raise OutputError(f"cannot write {text}: {_why(exc)}") from None
    if not stat.S_ISLNK(st.st_mode):
        return Path(text), st
    real = os.path.realpath(text)
    try:
        return Path(real), os.stat(real)
    except FileNotFoundError:
        raise OutputError(
            f"cannot write {text}: it is a symbolic link to {real}, which does not exist"
        ) from None
    except OSError as exc:
        raise OutputError(f"cannot write {text}: {_why(exc)}") from None


def _check(path: PathLike, inputs: Iterable[PathLike | None]) -> tuple[Path, os.stat_result | None]:
    """Kind, permission and input checks shared by :func:`check_output` and the writer."""
    given = os.fspath(path)
    real, st = _resolve(path)
    if st is not None:
        if not stat.S_ISREG(st.st_mode):
            hint = "give a file name" if stat.S_ISDIR(st.st_mode) else (
                "graphtune only replaces regular files: give a file name")
            raise OutputError(f"cannot write {given}: it is {_kind(st.st_mode)}; {hint}")
        if not os.access(real, os.W_OK):
            raise OutputError(f"cannot write {given}: the file is read-only")
    for inp in inputs:
        if inp is None or not os.fspath(inp):
            continue
        if same_file(real, inp) or (st is None and _same_new_path(real, inp)):
            raise OutputError(
                f"cannot write {given}: it is also an input of this command ({os.fspath(inp)}); "
                "choose another output"
            )
    directory = real.parent
    try:
        dst = os.stat(directory)
    except FileNotFoundError:
        raise OutputError(f"cannot write {given}: directory {directory} does not exist") from None
    except OSError as exc:
        raise OutputError(f"cannot write {given}: {_why(exc)}") from None
    if not stat.S_ISDIR(dst.st_mode):
        raise OutputError(f"cannot write {given}: {directory} is not a directory")
    return real, st


def _same_new_path(a: Path, b: PathLike) -> bool:
    try:
        return os.path.abspath(a) == os.path.abspath(b)
    except (OSError, ValueError):
        return False


def check_output(path: PathLike, *, inputs: Iterable[PathLike | None] = ()) -> Path:
    """Check that ``path`` can take an output, before any work is done.

    The checks of :class:`AtomicFile`, plus a probe: a temporary file is created
    in the target's directory and removed, which proves the directory writable
    (permissions, read-only or pseudo file systems, quotas on inodes).

    Args:
        path: The output path as the user gave it.
        inputs: The command's input files; the output may be none of them.

    Returns:
        The path that will be written (a symbolic link resolved).

    Raises:
        OutputError: The output cannot be written; the message says why.
    """
    real, _ = _check(path, inputs)
    fd, tmp = _create_temp(real, os.fspath(path))
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(tmp)
    return real


def check_outputs(
    outputs: Mapping[str, PathLike | None], inputs: Iterable[PathLike | None] = ()
) -> dict[str, Path]:
    """:func:`check_output` for each named output (``{"-o": path, "--onnx": None}``).

    Outputs given as None are skipped; two options naming the same file are refused.

    Returns:
        ``{option: resolved path}`` of the outputs given.
    """
    ins = list(inputs)
    out: dict[str, Path] = {}
    for option, path in outputs.items():
        if path is None:
            continue
        for other, seen in out.items():
            if same_file(seen, path) or _same_new_path(seen, path):
                raise OutputError(
                    f"{other} and {option} name the same file {os.fspath(path)}: give two files"
                )
        try:
            out[option] = check_output(path, inputs=ins)
        except OutputError as exc:
            raise OutputError(f"{option} {exc}") from None
    return out


def _create_temp(real: Path, given: str) -> tuple[int, str]:
    """A new, empty temp file beside ``real``; mode 0o666 less the umask (the kernel applies it)."""
    directory = real.parent
    stem = real.name[:_TEMP_NAME_CHARS]
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = os.path.join(directory, f".{stem}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
        except OSError as exc:
            raise OutputError(
                f"cannot write {given}: cannot create a file in {directory} ({_why(exc)})"
            ) from None
    raise OutputError(f"cannot write {given}: no free temporary name in {directory}")


class AtomicFile:
    """A binary output file that appears at its path complete, or not at all.

    Write to :attr:`file`; :meth:`commit` makes it the file at ``path``;
    :meth:`discard` (or leaving the ``with`` block with an exception) removes it.
    Several files can be staged and committed together, so a command with two
    outputs leaves neither behind when the second cannot be written.

    Example:
        >>> with AtomicFile("out.json", inputs=["model.onnx"]) as out:
        ...     out.file.write(b"{}")

    Args:
        path: The output path.
        inputs: Input files of the same command, which must not be overwritten.

    Raises:
        OutputError: The path is not writable (see the module doc).
    """

    def __init__(self, path: PathLike, *, inputs: Iterable[PathLike | None] = ()) -> None:
        self.given = os.fspath(path)
        self.path, st = _check(path, inputs)
        self._mode = stat.S_IMODE(st.st_mode) if st is not None else None
        fd, self._tmp = _create_temp(self.path, self.given)
        self.file: IO[bytes] = os.fdopen(fd, "wb")
        self._done = False

    def commit(self) -> int:
        """Flush, fsync and rename the temp file onto the path; returns its size.

        Raises:
            OutputError: Writing failed (disk full, ...) or the path became a
                special file meanwhile; the temp file is removed.
        """
        if self._done:
            raise ValueError(f"{self.given}: already committed or discarded")
        try:
            self.file.flush()
            os.fsync(self.file.fileno())
            if self._mode is not None:
                os.fchmod(self.file.fileno(), self._mode)
            size = os.fstat(self.file.fileno()).st_size
            self.file.close()
            try:
                st = os.lstat(self.path)
            except FileNotFoundError:
                st = None
            if st is not None and not stat.S_ISREG(st.st_mode):
                raise OutputError(
                    f"cannot write {self.given}: it became {_kind(st.st_mode)} meanwhile"
                )
            os.replace(self._tmp, self.path)
        except OSError as exc:
            self.discard()
            raise OutputError(f"cannot write {self.given}: {_why(exc)}") from None
        except BaseException:
            self.discard()
            raise
        self._done = True
        _fsync_dir(self.path.parent)
        return size

    def discard(self) -> None:
        """Close and remove the temp file (harmless after a commit or twice)."""
        if self._done:
            return
        self._done = True
        with contextlib.suppress(OSError):
            self.file.close()
        with contextlib.suppress(OSError):
            os.unlink(self._tmp)

    def __enter__(self) -> AtomicFile:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.discard()

    def write(self, data: bytes) -> None:
        """Write bytes to the temp file (a full disk is an :class:`OutputError`)."""
        try:
            self.file.write(data)
        except OSError as exc:
            self.discard()
            raise OutputError(f"cannot write {self.given}: {_why(exc)}") from None


def write_atomic(path: PathLike, data: bytes, *, inputs: Iterable[PathLike | None] = ()) -> int:
    """Write ``data`` to ``path`` through :class:`AtomicFile`; returns the size written."""
    out = AtomicFile(path, inputs=inputs)
    out.write(data)
    return out.commit()


def commit_all(files: Iterable[AtomicFile]) -> None:
    """Commit staged files together: if one fails, the ones not yet renamed are removed."""
    pending = list(files)
    try:
        for f in pending:
            f.commit()
    finally:
        for f in pending:
            f.discard()


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        # Some file systems refuse fsync on a directory; the rename is done anyway.
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


# ---- reading -----------------------------------------------------------------------------
def open_input(
    path: PathLike, what: str, error: type[GraphtuneError] = GraphtuneError
) -> IO[bytes]:
    """Open an input file for binary reading, refusing what is not a file.

    Args:
        path: The file.
        what: What it should be, for messages ("schedule file").
        error: The error class to raise.

    Raises:
        error: Missing, a directory or device, or unreadable.
    """
    text = os.fspath(path)
    try:
        st = os.stat(text)
    except (OSError, ValueError) as exc:
        reason = _why(exc) if isinstance(exc, OSError) else str(exc)
        raise error(f"cannot read {what} {text}: {reason}") from None
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
        raise error(f"{text} is {_kind(st.st_mode)}, not {_a(what)}")
    try:
        return open(text, "rb")  # noqa: SIM115 - the caller closes it
    except OSError as exc:
        if exc.errno == errno.EISDIR:
            raise error(f"{text} is a directory, not {_a(what)}") from None
        raise error(f"cannot read {what} {text}: {_why(exc)}") from None


def read_bounded(
    path: PathLike, what: str, limit: int, error: type[GraphtuneError] = GraphtuneError
) -> bytes:
    """Read a whole input file of at most ``limit`` bytes (see :func:`open_input`).

    Raises:
        error: Not readable, not a file, or larger than ``limit``.
    """
    with open_input(path, what, error) as f:
        try:
            data = f.read(limit + 1)
        except OSError as exc:
            raise error(f"cannot read {what} {os.fspath(path)}: {_why(exc)}") from None
    if len(data) > limit:
        raise error(
            f"{os.fspath(path)} is larger than {_size(limit)}: too large for {_a(what)}"
        )
    return data


def _a(noun: str) -> str:
    return f"an {noun}" if noun[:1].lower() in "aeio" else f"a {noun}"


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n} bytes"
