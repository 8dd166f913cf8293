"""``graphtune dashboard``: optuna-dashboard on the studies of a tuning job.

The studies are where ``graphtune tune`` put them: the journal next to a log
(``tune.jsonl`` -> ``tune.journal``) or the ``--storage`` the job was given.
Every measured trial carries ``status``, ``latency_us``, ``throughput_per_s``
and ``latency_over_bound`` as user attributes, so the dashboard's trial table
shows them. The server listens on loopback unless ``--host`` says otherwise.
"""

from __future__ import annotations

import errno
import os
from typing import Any

import click

from compiler.errors import GraphtuneError

_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def register(group: click.Group) -> None:
    """Attach this module's command."""
    group.add_command(dashboard_cmd)


@click.command("dashboard")
@click.argument("log_path", metavar="[LOG.jsonl]", required=False)
@click.option("--storage", default=None,
              help="The storage the job was tuned into (URL or journal file) instead of a log.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on (loopback by default: the dashboard can change studies).")
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True,
              help="Port to listen on (0: any free port).")
def dashboard_cmd(log_path: str | None, storage: str | None, host: str, port: int) -> None:
    """Serve optuna-dashboard on the studies of LOG.jsonl's job (or of --storage).

    A ``.journal`` file given in place of the log is opened as the storage itself.

    Example: graphtune dashboard tune.jsonl --port 8080, then open
    http://127.0.0.1:8080/dashboard. Ctrl-C stops it.
    """
    if not host.strip():
        raise GraphtuneError("--host is empty: give an address to listen on (127.0.0.1 by "
                             "default; 0.0.0.0 for every interface)")
    opened = open_for_dashboard(log_path, storage)
    import optuna_dashboard

    app = with_accept_encoding(optuna_dashboard.wsgi(opened))
    server = _make_server(app, host, port)
    bound = server.server_address[1]
    shown = f"[{host}]" if ":" in host else host
    if host not in _LOOPBACK:
        click.echo(f"graphtune: warning: serving on {host}: whoever reaches it can change or "
                   "delete the studies", err=True)
    click.echo(f"optuna-dashboard on http://{shown}:{bound}/dashboard (Ctrl-C stops it)", err=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()


def with_accept_encoding(app: Any) -> Any:
    """optuna-dashboard 0.21 answers HTTP 500 to a request without ``Accept-Encoding``
    (curl's default, many scripts'): such a request is passed on as ``identity``."""

    def wrapped(environ: dict[str, Any], start_response: Any) -> Any:
        environ.setdefault("HTTP_ACCEPT_ENCODING", "identity")
        return app(environ, start_response)

    return wrapped


def open_for_dashboard(log_path: str | None, storage: str | None) -> Any:
    """The Optuna storage of a log's job or of a storage spec, read as the dashboard reads it.

    Raises:
        GraphtuneError: neither or both given, a missing journal, or a storage that
            cannot be opened.
    """
    from autotune.running._journal import (
        journal_path_for,
        shown_url,
        sqlalchemy_url,
        storage_error,
        storage_file,
    )

    if (log_path is None) == (storage is None):
        raise GraphtuneError("give a tuning log (graphtune dashboard tune.jsonl) or "
                             "--storage URL, not both or neither")
    if log_path is not None and log_path.endswith(".journal"):
        storage, log_path = log_path, None  # the studies' journal itself, not a log
    if log_path is not None:
        spec = journal_path_for(log_path)
        if not os.path.isfile(spec):
            raise GraphtuneError(f"no studies next to {log_path}: {spec} does not exist (was the "
                                 "job tuned with --storage? then give that)")
    else:
        assert storage is not None
        spec = storage
    if not spec.strip():
        raise GraphtuneError("--storage is empty: give a journal file or a database URL")
    local = storage_file(spec)
    if local and not os.path.isfile(local):
        # The dashboard only reads: SQLite would create a missing database file.
        what = "does not exist" if not os.path.lexists(local) else "is not a regular file"
        raise GraphtuneError(f"study {'journal' if '://' not in spec else 'database'} "
                             f"{local} {what}")
    if "://" not in spec:
        from optuna.storages import JournalStorage
        from optuna.storages.journal import JournalFileBackend, JournalFileOpenLock

        try:
            return JournalStorage(JournalFileBackend(spec, JournalFileOpenLock(spec)))
        except Exception as exc:  # noqa: BLE001 - a damaged journal raises many kinds
            raise GraphtuneError(f"{spec} is not an Optuna journal ({exc})") from None
    from optuna.storages import RDBStorage

    try:
        return RDBStorage(sqlalchemy_url(spec), skip_table_creation=True)
    except GraphtuneError:
        raise
    except Exception as exc:  # noqa: BLE001 - SQLAlchemy raises many kinds
        if local:  # optuna's message for a file that is not a study database
            raise GraphtuneError(f"cannot open the study storage {shown_url(spec)}: {local} "
                                 "is not an Optuna SQLite database") from None
        raise GraphtuneError(storage_error(spec, exc)) from None


def _make_server(app: Any, host: str, port: int) -> Any:
    import socket
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

    class _Quiet(WSGIRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
            pass  # one line per request would bury the URL line

    server_class = WSGIServer
    if ":" in host:
        class _V6(WSGIServer):
            address_family = socket.AF_INET6

        server_class = _V6
    try:
        return make_server(host, port, app, server_class=server_class, handler_class=_Quiet)
    except OSError as exc:
        hint = " (choose another --port)" if exc.errno == errno.EADDRINUSE else ""
        raise GraphtuneError(f"cannot listen on {host}:{port}: {exc.strerror or exc}{hint}") from None
