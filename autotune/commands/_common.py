"""Helpers every CLI command shares: loading a model, progress, output checks, the console.

TVM and ONNX load inside these functions only, so importing this module is cheap.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from compiler.errors import GraphtuneError, ModelError
from compiler.files import check_outputs, write_atomic

if TYPE_CHECKING:
    from compiler.model import Model

__all__ = ["check_outputs", "console", "last_line", "load_model", "progress", "write_atomic"]

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
    from compiler.torch_import import load_model_file as load_onnx  # .onnx or .pt2

    with progress(f"importing {path}"):
        file_batch: int | None = None
        try:
            model = load_onnx(path)
            if batch is not None:
                file_batch = model.batch
                model.set_batch(batch)
            with native_output_to_log(log):
                _ = model.graph
                if relax:
                    _ = model.mod
        except ModelError as exc:
            if file_batch is not None and file_batch > 0 and file_batch != batch:
                raise ModelError(f"{exc} (the file is for batch {file_batch}: its graph may "
                                 f"not allow --batch {batch})") from None
            raise
        except GraphtuneError:
            raise
        except Exception as exc:  # noqa: BLE001 - the import stack raises many kinds
            raise ModelError(f"{path}: cannot import this model: {last_line(exc)}") from None
    return model


class _StatusHandler(logging.Handler):
    """Shows INFO records as the status line; prints warnings above it."""

    def __init__(self, update: Callable[[str], None], warn: Callable[[str], None]) -> None:
        super().__init__(logging.INFO)
        self._update = update
        self._warn = warn

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        if record.levelno >= logging.WARNING:
            self._warn(msg)
        else:
            self._update(msg)


PROGRESS_AFTER_S = 5.0
"""Off a terminal, the first progress line comes once a command has run this long."""
PROGRESS_EVERY_S = 30.0
"""Off a terminal, a stage that keeps running is reported again this often."""


class _Ticker:
    """Progress for a log file or a pipe: plain ``graphtune: ...`` lines on stderr.

    Nothing is printed for a command that finishes (or fails) within
    :data:`PROGRESS_AFTER_S`, so quick commands and user errors keep their
    one-line output; after that each new stage is printed once, and a long
    stage again every :data:`PROGRESS_EVERY_S`, with the elapsed time.
    """

    def __init__(self, what: str) -> None:
        self._text = what
        self._printed = ""
        self._last = 0.0
        self._t0 = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._stream, self._own = _stderr_stream()
        self._thread = threading.Thread(target=self._run, name="graphtune-progress", daemon=True)

    def __enter__(self) -> _Ticker:
        self.update(self._text)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        if self._own:
            with contextlib.suppress(OSError):
                self._stream.close()

    def update(self, text: str) -> None:
        """Set the current stage; past :data:`PROGRESS_AFTER_S` a new stage prints at once.

        Printing here rather than only from the polling thread means a stage
        shorter than the poll interval is still reported once the command is
        slow enough to report at all.
        """
        with self._lock:
            self._text = text
            now = time.monotonic()
            if now - self._t0 >= PROGRESS_AFTER_S and text != self._printed:
                self._printed, self._last = text, now
                self._print(f"graphtune: {text} ({now - self._t0:.0f} s)")

    def warn(self, text: str) -> None:
        self._print(f"graphtune: warning: {text}")

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            now = time.monotonic()
            elapsed = now - self._t0
            if elapsed < PROGRESS_AFTER_S:
                continue
            with self._lock:
                text = self._text
                if text != self._printed or now - self._last >= PROGRESS_EVERY_S:
                    self._printed, self._last = text, now
                    self._print(f"graphtune: {text} ({elapsed:.0f} s)")

    def _print(self, line: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            self._stream.write(line + "\n")
            self._stream.flush()


def _stderr_stream() -> tuple[Any, bool]:
    """Where progress goes: a duplicate of descriptor 2 (TVM may divert 2 meanwhile).

    Returns the stream and whether the caller closes it. When ``sys.stderr`` is
    not descriptor 2 (a test runner captures it), progress goes to it instead.
    """
    try:
        if sys.stderr.fileno() == 2:
            return os.fdopen(os.dup(2), "w", buffering=1), True
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        pass
    return sys.stderr, False


@contextlib.contextmanager
def progress(what: str, feed: str | None = None) -> Iterator[Callable[[str], None]]:
    """Show what a slow command is doing; yields ``update(text)``.

    On a terminal: a rich status line on stderr. Otherwise (a pipe, a log
    file): plain progress lines once the command has run a few seconds (see
    :class:`_Ticker`). With ``-v`` progress goes to the log instead. ``feed``
    names a logger whose INFO records update the text (the build's stages);
    its warnings are printed as ``warning:`` lines. The output goes to a
    duplicate of stderr's descriptor, so it keeps going while TVM's native
    output is diverted from descriptor 2 (see
    :func:`compiler.executor.native_output_to_log`).
    """
    if _ACTIVE:  # nested: reuse the line already on screen
        _ACTIVE[-1](what)
        yield _ACTIVE[-1]
        return
    source = logging.getLogger(feed) if feed else None
    verbose = log.isEnabledFor(logging.INFO) or (
        source is not None and source.isEnabledFor(logging.INFO)
    )
    if verbose:
        log.info("%s", what)
        yield lambda text: log.info("%s", text)
        return
    if not _stderr_is_terminal():
        with _Ticker(what) as ticker:
            _ACTIVE.append(ticker.update)
            try:
                if source is None:
                    yield ticker.update
                    return
                yield from _fed(source, ticker.update, ticker.warn)
            finally:
                _ACTIVE.pop()
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

                def warn(text: str) -> None:
                    con.print(f"warning: {text}", markup=False, highlight=False)

                yield from _fed(source, status.update, warn)
            finally:
                _ACTIVE.pop()


def _fed(
    source: logging.Logger, update: Callable[[str], None], warn: Callable[[str], None]
) -> Iterator[Callable[[str], None]]:
    """Route ``source``'s INFO records into ``update`` (warnings to ``warn``) while the caller runs."""
    handler = _StatusHandler(update, warn)
    old_level, old_propagate = source.level, source.propagate
    source.addHandler(handler)
    source.setLevel(logging.INFO)
    source.propagate = False
    try:
        yield update
    finally:
        source.removeHandler(handler)
        source.setLevel(old_level)
        source.propagate = old_propagate


def _stderr_is_terminal() -> bool:
    try:
        return os.isatty(2) and sys.stderr.isatty()
    except (OSError, ValueError, AttributeError):
        return False


def console() -> Any:
    """A rich console on the current stdout (CliRunner swaps it)."""
    from rich.console import Console

    return Console(highlight=False, soft_wrap=False)
