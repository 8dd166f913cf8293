"""ApplyHistoryBest through the compiler's dispatch hook."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from autotune import ApplyHistoryBest
from compiler import dispatch
from logs import Database, LogError, Status, target_key_str
from tests.logs.helpers import TARGET, TARGET2, WKEY, WKEY2, make_record, write_lines

T1 = target_key_str(TARGET.chip, TARGET.hash)
T2 = str(TARGET2)


@pytest.fixture
def best_log(tmp_path: Path) -> Path:
    path = tmp_path / "best.jsonl"
    write_lines(
        path,
        [
            make_record(300.0, tag=1),
            make_record(200.0, tag=2),
            make_record(None, status=Status.CAPACITY, tag=3),
        ],
    )
    return path


def _resolve(key: str, target: str) -> tuple[dict[str, object] | None, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        found = dispatch.resolve(key, target, "O2")
    return found, [str(w.message) for w in caught]


def test_hit_applies_the_best_schedule(best_log: Path) -> None:
    with ApplyHistoryBest(best_log) as ctx:
        found, messages = _resolve(WKEY, T1)
    assert found == make_record(tag=2).schedule and not messages
    assert (ctx.hits, ctx.misses) == (1, 0)
    assert dispatch.active_contexts() == []


def test_miss_warns_once_per_workload_and_falls_back(best_log: Path) -> None:
    with ApplyHistoryBest(best_log) as ctx:
        first, messages = _resolve(WKEY2, T1)
        second, again = _resolve(WKEY2, T1)
    assert first is None and second is None
    assert len(messages) == 1 and again == []
    assert WKEY2 in messages[0] and "falling back to O2" in messages[0]
    assert (ctx.hits, ctx.misses) == (0, 2)


def test_target_mismatch_is_a_miss(best_log: Path) -> None:
    with ApplyHistoryBest(best_log) as ctx:
        found, messages = _resolve(WKEY, T2)
    assert found is None and ctx.misses == 1
    assert f"only for target(s) {T1}" in messages[0] and T2 in messages[0]


def test_a_workload_with_only_failed_records_is_a_miss(tmp_path: Path) -> None:
    path = tmp_path / "failed.jsonl"
    write_lines(path, [make_record(None, status=Status.TIMEOUT)])
    with ApplyHistoryBest(path):
        found, messages = _resolve(WKEY, T1)
    assert found is None and "all 1 measurement(s) failed" in messages[0]


def test_strict_makes_a_miss_an_error(best_log: Path) -> None:
    with ApplyHistoryBest(best_log, strict=True) as ctx:
        assert dispatch.resolve(WKEY, T1, "O2") is not None
        with pytest.raises(LogError, match=f"no tuned schedule for workload {WKEY2}.*O2"):
            dispatch.resolve(WKEY2, T1, "O2")
    assert (ctx.hits, ctx.misses) == (1, 1)


def test_contexts_stack(best_log: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.jsonl"
    write_lines(other, [make_record(50.0, key=WKEY2, tag=7), make_record(999.0, tag=8)])
    with ApplyHistoryBest(best_log) as outer, ApplyHistoryBest(other, strict=True) as inner:
        assert dispatch.active_contexts() == [inner, outer]
        found, messages = _resolve(WKEY2, T1)  # inner hit
        assert found == make_record(key=WKEY2, tag=7).schedule
        found, messages = _resolve(WKEY, T1)  # inner has a worse one: inner answers first
        assert found == make_record(tag=8).schedule
        assert not messages
    assert (inner.hits, inner.misses, outer.hits, outer.misses) == (2, 0, 0, 0)
    with ApplyHistoryBest(other) as outer, ApplyHistoryBest(best_log) as inner:
        found, messages = _resolve(WKEY2, T1)  # inner miss, outer hit: no warning
    assert found == make_record(key=WKEY2, tag=7).schedule and not messages
    assert (inner.misses, outer.hits) == (1, 1)


def test_accepts_paths_and_databases(best_log: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.jsonl"
    write_lines(other, [make_record(50.0, key=WKEY2)])
    db = Database()
    db.add(make_record(10.0, tag=9))
    for source in ([str(best_log), other], db, str(best_log)):
        with ApplyHistoryBest(source) as ctx:
            assert dispatch.resolve(WKEY, T1, "O2") is not None
        assert ctx.hits == 1
    assert ApplyHistoryBest(db).database is db


def test_returned_schedule_is_a_copy(best_log: Path) -> None:
    with ApplyHistoryBest(best_log):
        found = dispatch.resolve(WKEY, T1, "O2")
        assert found is not None
        found["groups"].clear()  # type: ignore[attr-defined]
        assert dispatch.resolve(WKEY, T1, "O2") == make_record(tag=2).schedule


def test_unreadable_log_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(LogError, match="cannot read log"):
        ApplyHistoryBest(tmp_path / "missing.jsonl")
    with pytest.raises(LogError, match="at least one"):
        ApplyHistoryBest([])
