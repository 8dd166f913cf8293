"""Issue 14 again, on the surfaces that came after it: ``tune --storage``, measurer plugins,
``--worker-cpus``/``--worker-resource``, ``dashboard``, ``python -m bench``.

One test per finding; each failed before its fix (``--storage /dev/full`` read zeros
until the machine ran out of memory, ``/dev/null`` and a plugin's ``measure()`` ended
in tracebacks, ``sys.exit`` in a plugin ended graphtune silently, a failed job left an
empty log behind, an unparsable URL's password was printed, ``bench --out /proc/x``
traced back after its runs). All fast: the user errors are caught before a model loads.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import Result

from compiler import zoo
from tests.autotune.test_hostile import cli, one_line_error


def listing(d: Path) -> dict[str, bytes]:
    return {p.name: (p.read_bytes() if p.is_file() and not p.is_symlink() else b"")
            for p in d.iterdir()}


@pytest.fixture(scope="module")
def model() -> bytes:
    proto = zoo.build("tiny_cnn", batch=2, weights="inputs", image_size=16)
    return proto.SerializeToString()


@pytest.fixture
def case(tmp_path: Path, model: bytes, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory with tiny.onnx, a binary file and a FIFO, as the working directory."""
    (tmp_path / "tiny.onnx").write_bytes(model)
    (tmp_path / "garbage.bin").write_bytes(bytes(range(256)) * 4)
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def tune(*args: object) -> Result:
    return cli("tune", "tiny.onnx", "--trials", "1", "--log", "t.jsonl", "--workers", "0", *args)


# ---- tune --storage ------------------------------------------------------------------------------
@pytest.mark.parametrize(("storage", "fragment"), [
    ("/dev/full", "/dev/full is not a regular file"),  # was: read zeros until out of memory
    ("/dev/null", "/dev/null is not a regular file"),  # was: OSError traceback, exit 1
    ("fifo", "fifo is not a regular file"),
    ("sub", "sub is not a regular file"),
    ("", "--storage is empty"),
    ("t.jsonl", "it is the tuning log of this command"),  # was: "private journal of a running tune"
    ("t.curve.png", "it is the tuning curve of this command"),  # was: exit 0, journal clobbered
    ("tiny.onnx", "it is an input of this command"),
    ("sqlite:///t.jsonl", "it is the tuning log of this command"),  # was: log made an SQLite file
    ("sqlite:///tiny.onnx", "it is an input of this command"),
    ("sqlite:///no/such/x.db", "directory no/such does not exist"),
    ("no/such/x.journal", "directory no/such does not exist"),
])
def test_tune_storage_is_checked_before_anything_is_created(case: Path, storage: str,
                                                            fragment: str) -> None:
    before = listing(case)
    line = one_line_error(tune("--storage", storage))
    assert fragment in line, line
    assert listing(case) == before


@pytest.mark.parametrize("storage", ["sqlite:///garbage.bin", "garbage.bin"])
def test_tune_that_fails_on_its_storage_leaves_no_log(case: Path, storage: str) -> None:
    # The storage opens after the log is locked (created): it used to stay behind, empty.
    before = listing(case)
    line = one_line_error(tune("--storage", storage))
    assert "garbage.bin is not an" in line
    assert listing(case) == before


def test_tune_on_a_garbage_log_leaves_no_journal(case: Path) -> None:
    # The private journal was opened (created) before the log was read.
    before = listing(case)
    one_line_error(cli("tune", "tiny.onnx", "--trials", "1", "--log", "garbage.bin",
                       "--workers", "0"))
    assert listing(case) == before


def test_storage_password_is_never_printed(case: Path) -> None:
    line = one_line_error(tune("--storage", "postgresql://u:s3cret@[::1/db"))
    assert "s3cret" not in line and "u:***@" in line
    line = one_line_error(cli("dashboard", "--storage", "postgresql://u:s3cret@[::1/db"))
    assert "s3cret" not in line


def test_storage_helpers() -> None:
    from autotune.running._journal import hide_password, shown_url, storage_file

    assert shown_url("postgresql://u:pw@[::1/db") == "postgresql://u:***@[::1/db"
    assert shown_url("postgresql://u:pw@host/db") == "postgresql://u:***@host/db"
    assert hide_password("failed for pw at host", "postgresql://u:pw@host/db") == \
        "failed for *** at host"
    assert storage_file("sqlite:///x.db?mode=ro") == "x.db"  # was: claims at "x.db?mode=ro.claims"
    assert storage_file("sqlite:////abs/x.db") == "/abs/x.db"
    assert storage_file("sqlite:///:memory:") == storage_file("postgresql://h/db") == ""
    assert storage_file("studies.journal") == "studies.journal"


# ---- measurer plugins ------------------------------------------------------------------------------
PLUGIN = '''
import sys
from autotune import Measurer
from autotune.measure._measurer import SimMeasurer


class Exits(SimMeasurer):
    def __init__(self):
        sys.exit(3)


class Raises(SimMeasurer):
    def measure(self, graph, schedules, target, timeout_s):
        raise RuntimeError("the board fell over\\nfor good")


class ExitsInMeasure(SimMeasurer):
    def measure(self, graph, schedules, target, timeout_s):
        sys.exit(5)


class TooFew(SimMeasurer):
    def measure(self, graph, schedules, target, timeout_s):
        return []


class NotMeasurements(SimMeasurer):
    def measure(self, graph, schedules, target, timeout_s):
        return [42 for _ in schedules]


class WrongSignature(SimMeasurer):
    def measure(self, graph, schedules):
        return []
'''


@pytest.fixture
def plugin(case: Path, monkeypatch: pytest.MonkeyPatch,
           request: pytest.FixtureRequest) -> Iterator[str]:
    """A plugin module importable under a name unique to the test."""
    name = f"gt_plugin_{abs(hash(request.node.nodeid)) % 10**8}"
    (case / f"{name}.py").write_text(PLUGIN)
    (case / f"{name}_exit.py").write_text("raise SystemExit(4)\n")
    monkeypatch.syspath_prepend(str(case))
    yield name
    for mod in (name, f"{name}_exit"):
        sys.modules.pop(mod, None)


def test_plugin_that_exits_on_import_or_construction_is_one_line(case: Path, plugin: str) -> None:
    # sys.exit() is a BaseException: it ended graphtune with exit 4 and no word.
    line = one_line_error(tune("--measurer", f"{plugin}_exit:X"))
    assert f"cannot import {plugin}_exit" in line and "sys.exit(4)" in line
    line = one_line_error(tune("--measurer", f"{plugin}:Exits"))
    assert "Exits() failed" in line and "sys.exit(3)" in line


@pytest.mark.parametrize(("cls", "fragment"), [
    ("Raises", "raised RuntimeError: for good"),
    ("ExitsInMeasure", "raised SystemExit"),
    ("TooFew", "returned 0 results for"),
    ("NotMeasurements", "returned int"),
    ("WrongSignature", "raised TypeError"),
])
def test_measurer_that_fails_gives_error_records(case: Path, plugin: str, cls: str,
                                                 fragment: str) -> None:
    # A failure is data: it ended the job in a traceback (exit 1) before.
    r = tune("--measurer", f"{plugin}:{cls}")
    assert r.exit_code == 0 and "Traceback" not in r.output, (r.output, r.exception)
    records = [json.loads(line) for line in (case / "t.jsonl").read_text().splitlines()]
    assert records and all(rec["result"]["status"] == "sim_error" for rec in records)
    assert all(fragment in rec["result"]["error"] and "measurer" in rec["result"]["error"]
               for rec in records), records[0]["result"]


@pytest.mark.parametrize("args", [
    ("--worker-cpus", "nan"), ("--worker-cpus", "inf"),
    ("--worker-resource", "board=inf"), ("--worker-resource", "a b=1"),
    ("--measurer", "delayed", "--measurer-arg", "delay_s=NaN"),
    ("--measurer", "delayed", "--measurer-arg", "delay_s=1e999"),  # was: OverflowError, exit 1
    ("--measurer", "delayed", "--measurer-arg", "num_cpus=Infinity"),
    ("--measurer", "delayed", "--measurer-arg", "delay_s=true"),
])
def test_numbers_must_be_finite(case: Path, args: tuple[str, ...]) -> None:
    before = listing(case)
    one_line_error(tune(*args))
    assert listing(case) == before


@pytest.mark.parametrize("output", ["/dev/null", "fifo"])
def test_distill_per_target_names_no_files_after_a_special_file(case: Path, output: str) -> None:
    # -o /dev/null --per-target wrote /dev/null.<chip>-<hash>.jsonl into /dev (exit 0).
    log = case / "log.jsonl"
    _write_log(log)
    before = listing(case)
    line = one_line_error(cli("distill", log, "-o", output, "--per-target"))
    assert "is not a regular file" in line
    assert listing(case) == before
    assert not list(Path("/dev").glob("null.*.jsonl"))


def _write_log(path: Path) -> None:
    from logs import Provenance, Record, RecordWriter, Result, Status, TargetKey, WorkloadInfo

    with RecordWriter(path) as w:
        w.write(Record(WorkloadInfo("0" * 24, "m", {"x": [1]}, 1), TargetKey("STCP920", "ab" * 8),
                       {"v": 1, "batch": 1}, Result(Status.OK, latency_us=1.0), Provenance.now()))


# ---- dashboard ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("args", "fragment"), [
    (("--storage", "sqlite:///missing.db"), "study database missing.db does not exist"),
    (("--storage", "sqlite:///garbage.bin"), "garbage.bin is not an Optuna SQLite database"),
    (("--storage", "sqlite:///fifo"), "fifo is not a regular file"),
    (("--storage", "/dev/zero"), "/dev/zero is not a regular file"),
    (("--storage", "fifo"), "fifo is not a regular file"),
    (("--storage", ""), "--storage is empty"),
    (("--storage", "x.journal", "--host", ""), "--host is empty"),
])
def test_dashboard_only_reads(case: Path, args: tuple[str, ...], fragment: str) -> None:
    # sqlite:///missing.db used to create an empty database file and then fail.
    before = listing(case)
    line = one_line_error(cli("dashboard", *args))
    assert fragment in line, line
    assert listing(case) == before


# ---- python -m bench --------------------------------------------------------------------------------
@pytest.mark.parametrize(("extra", "fragment"), [
    (["--out", "{d}/garbage.bin"], "garbage.bin is not a directory"),
    (["--out", "/proc/graphtune-bench/x"], "cannot create a directory in /proc"),
    (["--logs", "{d}/garbage.bin/logs"], "garbage.bin is not a directory"),
    (["--readme", "{d}/garbage.bin"], "cannot read"),
    (["--models", "nosuch"], "invalid choice"),
])
def test_bench_checks_its_paths_before_running(case: Path, capsys: pytest.CaptureFixture[str],
                                               extra: list[str], fragment: str) -> None:
    # Before: runs took minutes, then a traceback (or a multi-line argparse usage).
    from bench.__main__ import main as bench_main

    argv = ["--models", "tiny_cnn", "--methods", "random", "--budget", "1", "--jobs", "1",
            "--out", str(case / "out"), "--logs", str(case / "logs"),
            *(a.format(d=case) for a in extra)]
    before = listing(case)
    with pytest.raises(SystemExit) as info:
        bench_main(argv)
    assert info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("python -m bench: error: "), lines
    assert fragment in lines[0], lines[0]
    assert listing(case) == before


def test_bench_report_only_refuses_a_damaged_run_file(case: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from bench.__main__ import main as bench_main

    runs = case / "out" / "runs"
    runs.mkdir(parents=True)
    (runs / "tiny_cnn_baselines.json").write_bytes(b"\xff\x00{torn")
    code = bench_main(["--models", "tiny_cnn", "--methods", "random", "--out", str(case / "out"),
                       "--report-only"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is damaged" in err[0]



@pytest.mark.timeout(180)  # a regression hangs: fail in minutes, not at the suite's 900 s
def test_a_postgresql_host_that_never_answers_is_one_line_not_a_hang(case: Path) -> None:
    """A server that accepts the connection and never answers (a stuck proxy, a wrong
    port): the 10 s connect timeout graphtune adds ends it with one line, nothing left."""
    import socket
    import threading

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:  # take connections and keep them open, silent
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                continue

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        before = listing(case)
        port = srv.getsockname()[1]
        line = one_line_error(tune("--storage", f"postgresql://u@127.0.0.1:{port}/studies"))
        assert "cannot open the study storage" in line, line
        assert listing(case) == before
    finally:
        stop.set()
        t.join()
        for c in held:
            c.close()
        srv.close()
