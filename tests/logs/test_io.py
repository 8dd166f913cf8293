"""Writing and reading logs: golden files, old versions, torn lines, SIGKILL."""

from __future__ import annotations

import json
import os
import random
import signal
import stat
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

import logs._io
from logs import (
    Database,
    LogError,
    LogWarning,
    Record,
    RecordWriter,
    Status,
    read_records,
    write_records_atomic,
)
from tests.logs.golden_records import GOLDEN
from tests.logs.helpers import make_record, write_lines

DATA = Path(__file__).parent / "data"
REPO = Path(__file__).resolve().parents[2]


def _read(path: Path) -> tuple[list[Record], list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        records = list(read_records(path))
    return records, caught


# --- golden files -------------------------------------------------------------------------


def test_golden_v1_0_reads_as_spelled_out() -> None:
    records, caught = _read(DATA / "v1_0_golden.jsonl")
    assert not caught
    assert records == GOLDEN


def test_golden_v1_0_is_what_the_writer_writes(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    with RecordWriter(out) as writer:
        writer.write_many(GOLDEN)
    assert out.read_bytes() == (DATA / "v1_0_golden.jsonl").read_bytes()


def test_old_0_9_fixture_is_upgraded(tmp_path: Path) -> None:
    records, caught = _read(DATA / "v0_9_old.jsonl")
    assert not caught
    assert [r.result.status for r in records] == [
        Status.OK,
        Status.CAPACITY,
        Status.TIMEOUT,
        Status.OK,
    ]
    assert records[1].result.latency_us is None and records[3].prov.trial is None
    assert all(r.version == "1.0" for r in records)
    out = tmp_path / "upgraded.jsonl"
    write_lines(out, records)
    assert out.read_bytes() == (DATA / "v0_9_upgraded.jsonl").read_bytes()


def test_newer_minor_fixture_keeps_unknown_keys(tmp_path: Path) -> None:
    [record], caught = _read(DATA / "v1_3_newer_minor.jsonl")
    assert not caught
    assert record.version == "1.3" and record.extra == {"energy_uj": 12.5}
    assert record.prov.extra == {"git": "abc123"}
    original = json.loads((DATA / "v1_3_newer_minor.jsonl").read_text())
    rewritten = json.loads(record.to_line())
    del rewritten["crc32"]
    assert rewritten == original


def test_newer_major_version_is_refused_with_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "new.jsonl"
    good = make_record().to_line()
    newer = json.loads(good)
    newer["v"] = "2.0"
    path.write_text(good + json.dumps(newer) + "\n")
    message = f"file {path} line 2 has record version 2.0, newer than this graphtune (1.x): upgrade graphtune"
    with pytest.raises(LogError) as info:
        list(read_records(path))
    assert str(info.value) == message
    with pytest.raises(LogError, match="upgrade graphtune"):
        Database.load(path)


# --- torn and garbage lines ---------------------------------------------------------------


def test_torn_and_garbage_lines_are_skipped_with_one_warning(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    lines = [make_record(100.0 + i, trial=i).to_line() for i in range(5)]
    lines.insert(2, "this is not json\n")
    lines.insert(4, '{"some": "other json"}\n')
    text = "".join(lines) + "\n" + lines[0][:57]  # a blank line, then a torn tail
    path.write_text(text)
    records, caught = _read(path)
    assert [r.prov.trial for r in records] == [0, 1, 2, 3, 4]
    assert len(caught) == 1 and caught[0].category is LogWarning
    message = str(caught[0].message)
    assert "skipped 3 unreadable line(s) at line(s) 3, 5, 9" in message
    assert "line 9 is a torn last line" in message
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        report = Database().add_file(path)
    assert report.bad_lines == (3, 5, 9) and report.torn_last_line and report.records == 5


def test_a_file_of_only_a_torn_record_is_a_log_with_no_records(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text(make_record().to_line()[:100])
    records, caught = _read(path)
    assert records == [] and len(caught) == 1


@pytest.mark.parametrize(
    "content",
    [b"\x08\x07\x12\x00binary\nstuff\x00\n\x01", b'{"a": 1}\n{"b": 2}\n', b"hello\nworld\n"],
)
def test_a_file_that_is_not_a_log_is_an_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "model.onnx"
    path.write_bytes(content)
    with warnings.catch_warnings(record=True), pytest.raises(LogError, match="not a graphtune log"):
        list(read_records(path))


def test_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(LogError, match=r"cannot read log .*No such file"):
        list(read_records(tmp_path / "nope.jsonl"))


def test_hand_edited_line_is_still_read(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    line = make_record(500.0).to_line().replace('"batch":8,"groups"', '"batch":8, "groups"')
    path.write_text(line)
    [record], caught = _read(path)
    assert not caught and record.result.latency_us == 500.0
    assert Database.load(path).best(record.workload_key, record.target)[0] == record


# --- the writer ---------------------------------------------------------------------------


def test_writer_appends_and_mends_a_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    with RecordWriter(path) as writer:
        writer.write(make_record(trial=0))
        assert writer.count == 1
    with open(path, "a") as f:
        f.write(make_record(trial=1).to_line()[:80])  # a writer died here
    torn = make_record(trial=1).to_line()[:80]
    with RecordWriter(path) as writer:
        writer.write(make_record(trial=2))
    records, caught = _read(path)
    assert [r.prov.trial for r in records] == [0, 2]
    assert not caught  # repaired on open: no bad line left in the log
    assert (tmp_path / "log.jsonl.torn").read_text() == torn + "\n"


def test_writer_fsyncs_on_close_and_after_the_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[float] = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        synced.append(time.monotonic())
        real_fsync(fd)

    monkeypatch.setattr(logs._io.os, "fsync", counting_fsync)
    writer = RecordWriter(tmp_path / "log.jsonl", fsync_interval_s=0.05)
    writer.write(make_record())
    deadline = time.monotonic() + 5
    while not synced and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(synced) == 1  # the idle timer synced
    writer.write(make_record(trial=1))
    writer.close()
    writer.close()
    assert len(synced) >= 2
    with pytest.raises(ValueError, match="closed"):
        writer.write(make_record())


def test_a_write_never_waits_for_an_fsync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An fsync that takes long (a busy disk) holds no writer: the timer fsyncs outside
    the writers' lock (the tuning driver waited on it; issue 20), and close() waits for it
    and fsyncs what came after."""
    import threading

    entered, release = threading.Event(), threading.Event()
    synced: list[int] = []
    real_fsync = os.fsync

    def slow_fsync(fd: int) -> None:
        entered.set()
        release.wait(30)
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(logs._io.os, "fsync", slow_fsync)
    writer = RecordWriter(tmp_path / "log.jsonl", fsync_interval_s=0.0)
    done: list[int] = []

    def writes() -> None:
        writer.write(make_record(trial=0))  # due at once: the timer fsyncs, not this thread
        assert entered.wait(10)
        for i in range(1, 4):  # while the fsync hangs
            writer.write(make_record(trial=i))
            done.append(i)

    t = threading.Thread(target=writes, daemon=True)
    t.start()
    t.join(10)
    try:
        assert done == [1, 2, 3] and not t.is_alive()
        assert len(list(read_records(tmp_path / "log.jsonl"))) == 4  # in the file already
    finally:
        release.set()
    writer.close()  # waits for the timer's fsync, then syncs the rest itself
    assert len(synced) >= 2 and not writer._syncing


@pytest.mark.parametrize("fails", [False, True])
def test_flush_waits_for_the_timers_fsync_and_reports_a_failed_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fails: bool) -> None:
    """flush() ("fsync now") returned while the timer's fsync of the same records still ran
    (and might fail): nothing made durable, no error. It waits for it, and a timer fsync
    that failed is one LogError from flush() (the timer thread prints nothing)."""
    import threading

    entered, release = threading.Event(), threading.Event()
    timer_done: list[bool] = []
    real_fsync = os.fsync

    def slow_fsync(fd: int) -> None:
        if threading.current_thread() is threading.main_thread() or timer_done:
            real_fsync(fd)  # the flush's own fsync (or a later timer's)
            return
        entered.set()
        release.wait(30)
        timer_done.append(True)
        if fails:
            raise OSError(5, "Input/output error")
        real_fsync(fd)

    monkeypatch.setattr(logs._io.os, "fsync", slow_fsync)
    hooked: list[object] = []
    monkeypatch.setattr(threading, "excepthook", hooked.append)
    writer = RecordWriter(tmp_path / "log.jsonl", fsync_interval_s=0.0)
    writer.write(make_record(trial=0))
    assert entered.wait(10)  # the timer is in its fsync
    out: list[BaseException | None] = []

    def flush() -> None:
        try:
            writer.flush()
            out.append(None)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            out.append(exc)

    t = threading.Thread(target=flush, daemon=True)
    t.start()
    t.join(0.3)
    alive = t.is_alive()
    release.set()
    t.join(10)
    assert alive and timer_done  # flush waited for the timer's fsync
    assert len(out) == 1 and not hooked
    if fails:
        assert isinstance(out[0], LogError) and "Input/output error" in str(out[0])
    else:
        assert out[0] is None
    writer.close()  # reported once: the retried fsync succeeded


def test_a_failed_close_does_not_hide_the_error_that_ended_the_block(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="the job's own") as caught, \
            RecordWriter(tmp_path / "log.jsonl") as writer:
        writer._failed = OSError(5, "Input/output error")  # a timer fsync failed
        raise ValueError("the job's own error")
    assert "Input/output error" in " ".join(getattr(caught.value, "__notes__", []))
    writer = RecordWriter(tmp_path / "log.jsonl")
    writer._failed = OSError(5, "Input/output error")
    with pytest.raises(LogError, match="Input/output error"), writer:
        pass


def test_writer_on_a_directory_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(LogError, match="cannot open log"):
        RecordWriter(tmp_path)


def test_atomic_write_keeps_mode_and_leaves_no_temp_file(tmp_path: Path) -> None:
    path = tmp_path / "best.jsonl"
    path.write_text("old\n")
    path.chmod(0o640)
    assert write_records_atomic(path, [make_record(1.0), make_record(2.0)]) == 2
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["best.jsonl"]

    def failing() -> list[Record]:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        write_records_atomic(path, (r for r in failing()))
    assert [p.name for p in tmp_path.iterdir()] == ["best.jsonl"]
    assert len(list(read_records(path))) == 2


# --- SIGKILL ------------------------------------------------------------------------------

_WRITER = """
import itertools, os, sys
sys.path.insert(0, {repo!r})
real_write = os.write
# A slow disk: at most 97 bytes per write() call, so kills land inside records.
os.write = lambda fd, data: real_write(fd, bytes(data[:97]))
from logs import RecordWriter
from tests.logs.helpers import make_record
path, run = sys.argv[1], sys.argv[2]
with RecordWriter(path, fsync_interval_s=0.2) as writer:
    print("ready", flush=True)
    for i in itertools.count():
        writer.write(make_record(100.0 + i % 7, trial=i, study=run, tag=i % 5, pad=i % 900))
"""


def test_sigkill_mid_stream_loses_only_the_torn_lines(tmp_path: Path) -> None:
    path = tmp_path / "killed.jsonl"
    script = _WRITER.format(repo=str(REPO))
    rng = random.Random(20)
    kills = 20
    for run in range(kills):
        proc = subprocess.Popen(
            [sys.executable, "-c", script, str(path), f"run{run}"],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n"
        time.sleep(rng.uniform(0.0, 0.08))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()

    # Independently of graphtune: which lines are whole records, which are torn?
    raw = path.read_bytes()
    whole, torn = [], []
    for number, line in enumerate(raw.split(b"\n"), start=1):
        if not line:
            continue
        try:
            obj = json.loads(line)
            whole.append((number, obj["prov"]["study"], obj["prov"]["trial"]))
        except ValueError:
            torn.append(number)
    # Each new writer moved the torn tail it found to killed.jsonl.torn.
    torn_file = Path(f"{path}.torn")
    moved = torn_file.read_bytes().splitlines() if torn_file.exists() else []
    assert moved or torn, "no kill landed inside a record; the test did not test anything"
    print(f"{len(whole)} whole records, {len(moved)} torn lines moved, {torn} left at the end")
    assert len(moved) + len(torn) <= kills
    assert torn in ([], [len(raw.rstrip(b"\n").split(b"\n"))])  # only the very last line

    records, caught = _read(path)
    assert [(r.prov.study, r.prov.trial) for r in records] == [(s, t) for _, s, t in whole]
    for run in range(kills):  # each run's records are all there, in order, none lost
        trials = [r.prov.trial for r in records if r.prov.study == f"run{run}"]
        assert trials == list(range(len(trials)))
    assert len(caught) == (1 if torn else 0)
    if torn:
        assert f"skipped {len(torn)} unreadable line(s)" in str(caught[0].message)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        report = Database().add_file(path)
    assert list(report.bad_lines) == torn and report.records == len(whole)
    assert report.torn_last_line == (not raw.endswith(b"\n"))
