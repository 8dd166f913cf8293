"""The ``graphtune`` command line.

Subcommands live in :mod:`autotune.commands`; each imports TVM only inside the
command body, so ``graphtune --help`` and the log commands start fast.
A :class:`compiler.errors.GraphtuneError` raised anywhere becomes one line on
stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import logging
import sys
import warnings
from collections.abc import Sequence
from typing import Any

import click

from compiler.errors import GraphtuneError

EXIT_USER_ERROR = 2


class _Group(click.Group):
    """A click group that turns user errors into one line and exit status 2.

    That covers click's own usage errors too (an unknown option, a directory
    given for a file): ``graphtune: error: <what> (see 'graphtune zoo --help')``
    instead of click's four-line usage block.
    """

    def main(  # type: ignore[override]  # one signature for click's two overloads
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        if args is None:  # the console script: this process ends with the command
            try:
                self._standalone(args, prog_name, complete_var, **extra)
            except SystemExit as exc:
                _exit_now(exc.code)
        self._standalone(args, prog_name, complete_var, **extra)

    def _standalone(self, args: Sequence[str] | None, prog_name: str | None,
                    complete_var: str | None, **extra: Any) -> None:
        try:
            rv = super().main(args, prog_name, complete_var, False, **extra)
        except click.exceptions.NoArgsIsHelpError as exc:
            exc.show()  # `graphtune` alone prints the help
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            message = " ".join(exc.format_message().split())
            ctx = getattr(exc, "ctx", None)
            hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
            click.echo(f"graphtune: error: {message}{hint}", err=True)
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:
            click.echo("graphtune: interrupted", err=True)
            sys.exit(130)
        sys.exit(rv if isinstance(rv, int) else 0)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except GraphtuneError as exc:
            click.echo(f"graphtune: error: {exc}", err=True)
            sys.exit(EXIT_USER_ERROR)
        except KeyboardInterrupt:
            click.echo("graphtune: interrupted", err=True)
            sys.exit(130)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", count=True, help="More log output (-vv for debug).")
@click.option("--plugin", "plugins", multiple=True, metavar="MODULE",
              help="Load user NPU ops from MODULE (a module, module:function or .py file) "
                   "before the command; repeatable. See 'Custom operators' in the README.")
@click.version_option(package_name="graphtune")
def main(verbose: int, plugins: tuple[str, ...]) -> None:
    """graphtune: find and apply fast graph schedules for the STCP920 NPU."""
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    if not verbose:
        # Without -v only warnings and errors show: as the CLI's own one-line messages.
        for handler in logging.getLogger().handlers:
            if type(handler) is logging.StreamHandler:  # basicConfig's, not a test runner's
                handler.setFormatter(_OneLine())
        warnings.showwarning = _show_warning
    from compiler.ops._plugins import load_plugins  # no TVM: the op modules import it lazily

    load_plugins(plugins, export=True)


def _exit_now(code: object) -> None:
    """End the process with ``code`` (``sys.exit``'s meaning) once its output is safe.

    The exit handlers run (Ray's shutdown among them) and every stream and log handler
    is flushed; what is skipped is the interpreter's teardown of its modules, which takes
    2-3 s once TVM is loaded (measured on a `tune --time-budget 20s`: the command returned
    at 21.5 s, the process ended at 23.9 s). ``GRAPHTUNE_SLOW_EXIT=1`` keeps the normal exit.
    """
    import atexit
    import os

    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:
        print(code, file=sys.stderr)
        status = 1
    if os.environ.get("GRAPHTUNE_SLOW_EXIT"):
        sys.exit(status)
    atexit._run_exitfuncs()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be written anyway
            pass
    os._exit(status)


class _OneLine(logging.Formatter):
    """``graphtune: warning: <message>`` (or ``error:``), without logger names."""

    def format(self, record: logging.LogRecord) -> str:
        kind = "error" if record.levelno >= logging.ERROR else "warning"
        return f"graphtune: {kind}: {record.getMessage()}"


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: Any = None, line: str | None = None) -> None:
    """Python warnings as ``graphtune: warning: <message>`` lines (no source path)."""
    text = " ".join(str(message).split())
    try:
        print(f"graphtune: warning: {text}", file=file or sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def _register() -> None:
    from autotune.commands import register_all, report_cmds

    register_all(main)
    report_cmds.register(main)


_register()

if __name__ == "__main__":  # pragma: no cover
    main()
