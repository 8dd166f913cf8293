"""The study journal's appends and fsyncs run on its writer thread, never on the driver's:
the driver's periodic flush hands the operations over and goes on; readers see every
operation exactly once while an append is under way; the end of a job waits for the disk."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from autotune.running._journal import BufferedJournalFile, open_storage
from compiler.errors import GraphtuneError


def _op(i: int) -> dict[str, Any]:
    return {"op_code": 0, "worker_id": "w", "study_name": f"s{i}", "directions": [1]}


def test_a_flush_that_does_not_wait_returns_while_the_append_hangs(tmp_path: Path) -> None:
    journal = BufferedJournalFile(str(tmp_path / "j.journal"))
    inner = journal._append  # the append (lines, file lock, write, fsync)
    entered, release = threading.Event(), threading.Event()

    def slow(logs: list[dict[str, Any]]) -> None:  # an fsync that takes its time
        entered.set()
        assert release.wait(30)
        inner(logs)

    journal._append = slow  # type: ignore[method-assign]
    journal.append_logs([_op(0), _op(1)])
    journal.flush(wait=False)  # returns at once (the old flush blocked here)
    assert entered.wait(30)
    journal.append_logs([_op(2)])
    names = [e["study_name"] for e in journal.read_logs(0)]
    assert names == ["s0", "s1", "s2"]  # each once, while the append is under way
    assert [e["study_name"] for e in journal.read_logs(2)] == ["s2"]
    release.set()
    journal.flush()  # waits: everything is on disk
    assert (tmp_path / "j.journal").read_bytes().count(b"\n") == 3
    assert [e["study_name"] for e in journal.read_logs(1)] == ["s1", "s2"]
    journal.close()
    assert not journal._writer or not journal._writer.is_alive()


def test_a_failed_append_is_one_error_line_at_the_next_flush(tmp_path: Path) -> None:
    journal = BufferedJournalFile(str(tmp_path / "j.journal"))

    def full(logs: list[dict[str, Any]]) -> None:
        raise OSError(28, "No space left on device")

    journal._append = full  # type: ignore[method-assign]
    journal.append_logs([_op(0)])
    with pytest.raises(GraphtuneError, match="No space left on device"):
        journal.flush()
    with pytest.raises(GraphtuneError):
        journal.close()
    assert journal._lock_fd < 0


def test_no_journal_append_runs_on_the_drivers_thread(
        tiny_graph: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A whole (in-process) tune: its journal is written, and never by the driver's thread."""
    import autotune.running._driver as driver_mod
    from autotune import tune

    threads: list[str] = []
    real = BufferedJournalFile._append

    def append(self: Any, logs: list[dict[str, Any]]) -> None:
        threads.append(threading.current_thread().name)
        real(self, logs)

    monkeypatch.setattr(BufferedJournalFile, "_append", append)
    monkeypatch.setattr(driver_mod, "FLUSH_EVERY_S", 0.0)  # a periodic flush per batch
    log = tmp_path / "t.jsonl"
    tune([tiny_graph], trials=24, workers=0, log=str(log), seed=0, curve=False)
    assert len(threads) >= 2
    assert threading.main_thread().name not in threads
    again = open_storage(None, str(log))  # the journal holds the whole job
    import optuna

    names = optuna.get_all_study_names(again.storage)
    assert names and len(optuna.load_study(study_name=names[0],
                                           storage=again.storage).trials) == 24
    again.close()
