"""Helpers every CLI command shares: loading a model, progress, atomic writes, the console.

TVM and ONNX load inside these functions only, so importing this module is cheap.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compiler.errors import GraphtuneError, ModelError

if TYPE_CHECKING:
    from rich.status import Status

    from compiler.model import Model

log = logging.getLogger("autotune.cli")
_ACTIVE: list[Callable[[str], None]] = []  # the status line on screen, if any


def last_line(exc: BaseException) -> str:
    """The last non-empty line of an exception's message (TVM puts the point there)."""
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    return lines[-1] if lines else type(exc).__name__


def load_model(path: str, batch: int | None = None, *, relax: bool = False) -> Model:
    """Load an ONNX file, set the batch and import it, showing progress.

    Every failure is a ModelError (``load_onnx`` already turns file problems into
    one; anything else the import stack raises is wrapped), so the CLI never
    shows a traceback. TVM's native chatter goes to the log, not stderr.

    Args:
        path: The ONNX file.
        batch: Dim 0 of every data input (None: the file's).
        relax: Also build the Relax module with real weights (to compile); the
            Graph alone needs neither.
    """
    from compiler.executor import native_output_to_log
    from compiler.model import load_onnx

    with progress(f"importing {path}"):
        try:
            model = load_onnx(path)
            if batch is not None:
                model.set_batch(batch)
            with native_output_to_log(log):
                _ = model.graph
                if relax:
                    _ = model.mod
        except GraphtuneError:
            raise
        except Exception as exc:  # noqa: BLE001 - the import stack raises many kinds
            raise ModelError(f"{path}: cannot import this model: {last_line(exc)}") from None
    return model


class _StatusHandler(logging.Handler):
    """Shows INFO records as the status line; prints warnings above it."""

    def __init__(self, status: Status, con: Any) -> None:
        super().__init__(logging.INFO)
        self._status = status
        self._console = con

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        if record.levelno >= logging.WARNING:
            self._console.print(f"warning: {msg}", markup=False, highlight=False)
        else:
            self._status.update(msg)


@contextlib.contextmanager
def progress(what: str, feed: str | None = None) -> Iterator[Callable[[str], None]]:
    """A rich status line on stderr while something slow runs; yields ``update(text)``.

    Only on a terminal; otherwise (and with ``-v``) progress goes to the log.
    ``feed`` names a logger whose INFO records update the line (the build's
    stages). The status writes to a duplicate of stderr's descriptor, so it
    keeps spinning while TVM's native output is diverted from descriptor 2
    (see :func:`compiler.executor.native_output_to_log`).
    """
    if _ACTIVE:  # nested: reuse the line already on screen
        _ACTIVE[-1](what)
        yield _ACTIVE[-1]
        return
    source = logging.getLogger(feed) if feed else None
    verbose = log.isEnabledFor(logging.INFO) or (
        source is not None and source.isEnabledFor(logging.INFO)
    )
    if verbose or not _stderr_is_terminal():
        log.info("%s", what)
        yield lambda text: log.info("%s", text)
        return
    from rich.console import Console

    with os.fdopen(os.dup(2), "w", buffering=1) as stream:
        con = Console(file=stream, highlight=False)
        with con.status(what) as status:
            _ACTIVE.append(status.update)
            try:
                if source is None:
                    yield status.update
                    return
                yield from _fed(source, status, con)
            finally:
                _ACTIVE.pop()


def _fed(source: logging.Logger, status: Status, con: Any) -> Iterator[Callable[[str], None]]:
    """Route ``source``'s INFO records into the status line while the caller runs."""
    handler = _StatusHandler(status, con)
    old_level, old_propagate = source.level, source.propagate
    source.addHandler(handler)
    source.setLevel(logging.INFO)
    source.propagate = False
    try:
        yield status.update
    finally:
        source.removeHandler(handler)
        source.setLevel(old_level)
        source.propagate = old_propagate


def _stderr_is_terminal() -> bool:
    try:
        return os.isatty(2)
    except OSError:
        return False


def write_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` through a temp file in the same directory, then rename."""
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    if not directory.is_dir():
        raise GraphtuneError(f"cannot write {target}: directory {directory} does not exist")
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{target.name}-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def console() -> Any:
    """A rich console on the current stdout (CliRunner swaps it)."""
    from rich.console import Console

    return Console(highlight=False, soft_wrap=False)
