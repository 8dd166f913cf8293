"""The best-k database: ranking, counters, streaming, fast and full decoding agree."""

from __future__ import annotations

import json
import random
import warnings
from pathlib import Path

import pytest

from logs import Database, Record, Status, TargetKey
from tests.logs.helpers import T0, TARGET, TARGET2, WKEY, WKEY2, make_record, write_lines

DATA = Path(__file__).parent / "data"


def _mixed(n: int = 60, seed: int = 1) -> list[Record]:
    rng = random.Random(seed)
    statuses = list(Status)
    out = []
    for i in range(n):
        status = statuses[i % len(statuses)] if i % 3 == 0 else Status.OK
        out.append(
            make_record(
                float(rng.randint(100, 200)) if status is Status.OK else rng.choice([None, 1.0]),
                status=status,
                key=rng.choice([WKEY, WKEY2]),
                target=rng.choice([TARGET, TARGET2]),
                time_s=T0 + rng.randint(0, 5),
                trial=i,
                tag=rng.randint(0, 3),
            )
        )
    return out


def _expected_best(records: list[Record], k: int) -> dict[tuple[str, str, str], list[Record]]:
    groups: dict[tuple[str, str, str], dict[str, Record]] = {}
    for r in records:
        if r.is_valid:
            groups.setdefault(r.index_key, {})[r.canonical()] = r
    return {key: sorted(g.values(), key=Record.rank_key)[:k] for key, g in groups.items()}


def test_best_k_matches_a_full_sort_in_any_load_order() -> None:
    records = _mixed()
    expected = _expected_best(records, 3)
    for seed in range(5):
        shuffled = records[:]
        random.Random(seed).shuffle(shuffled)
        db = Database(top_k=3)
        db.add_all(shuffled)
        for (wkey, chip, hash_), best in expected.items():
            assert db.best(wkey, TargetKey(chip, hash_), k=3) == best
            assert db.best(wkey, f"{chip}:{hash_}", k=1) == best[:1]


def test_failed_records_never_rank_even_with_a_lower_latency() -> None:
    db = Database()
    db.add(make_record(None, status=Status.CAPACITY))
    assert db.best(WKEY, TARGET) == []
    db.add(make_record(500.0, trial=1))
    db.add(make_record(1.0, status=Status.SIM_ERROR, trial=2))
    [best] = db.best(WKEY, TARGET)
    assert best.prov.trial == 1


def test_targets_never_mix() -> None:
    db = Database()
    db.add(make_record(100.0, target=TARGET))
    db.add(make_record(50.0, target=TARGET2, tag=1))
    assert db.best(WKEY, TARGET)[0].result.latency_us == 100.0
    assert db.best(WKEY, TARGET2)[0].result.latency_us == 50.0
    assert db.best(WKEY, TargetKey("STCP920", "ffff")) == []
    assert db.targets(WKEY) == sorted([TARGET, TARGET2])
    assert set(db.query(WKEY)) == {TARGET, TARGET2}
    assert db.query("0000") == {}


def test_ties_go_to_the_earlier_record_then_the_json_text() -> None:
    late = make_record(100.0, time_s=T0 + 10, tag=0)
    early = make_record(100.0, time_s=T0, tag=1)
    twin = make_record(100.0, time_s=T0, tag=2)
    for order in ([late, early, twin], [twin, late, early], [early, twin, late]):
        db = Database(top_k=2)
        db.add_all(order)
        assert db.best(WKEY, TARGET, 2) == sorted([early, twin], key=Record.canonical)


def test_identical_records_rank_once() -> None:
    db = Database(top_k=3)
    record = make_record(100.0)
    db.add_all([record, record, make_record(200.0, tag=1)])
    assert [r.result.latency_us for r in db.best(WKEY, TARGET, 3)] == [100.0, 200.0]
    assert len(db) == 3


def test_counters() -> None:
    db = Database()
    db.add(make_record(300.0, time_s=T0 + 1))
    db.add(make_record(200.0, time_s=T0 + 5, tag=1))
    db.add(make_record(200.0, time_s=T0 + 3, tag=2))
    db.add(make_record(None, status=Status.CAPACITY, time_s=T0 + 9))
    db.add(make_record(None, status=Status.CAPACITY, time_s=T0))
    db.add(make_record(None, status=Status.TIMEOUT, time_s=T0 + 2))
    stats = db.stats(WKEY, TARGET)
    assert stats is not None
    assert (stats.count, stats.valid) == (6, 3)
    assert stats.errors == {Status.CAPACITY: 2, Status.TIMEOUT: 1}
    assert (stats.best_latency_us, stats.best_time_unix_s) == (200.0, T0 + 3)
    assert (stats.first_time_unix_s, stats.last_time_unix_s) == (T0, T0 + 9)
    assert stats.workload.model == "resnet50" and stats.target == TARGET
    assert db.stats(WKEY2, TARGET) is None
    assert db.workloads() == [WKEY] and db.keys() == [(WKEY, TARGET.chip, TARGET.hash)]


def test_asking_for_more_than_kept_is_an_error() -> None:
    with pytest.raises(ValueError, match="keeps 1"):
        Database().best(WKEY, TARGET, k=2)
    with pytest.raises(ValueError, match="top_k"):
        Database(top_k=0)


def test_fast_and_full_decoding_agree(tmp_path: Path) -> None:
    records = _mixed(200, seed=7)
    fast = tmp_path / "fast.jsonl"
    full = tmp_path / "full.jsonl"
    write_lines(fast, records)
    # The same records without the CRC (as another writer would write them).
    full.write_text("".join(json.dumps(r.to_json()) + "\n" for r in records))
    a = Database.load(fast, top_k=2)
    b = Database.load(full, top_k=2)
    assert len(a) == len(b) == 200
    assert a.all_stats() == b.all_stats()
    assert list(a.best_records()) == list(b.best_records())
    c = Database(top_k=2)
    c.add_all(records)
    assert list(c.best_records()) == list(a.best_records())


def test_load_many_files_and_report_each(tmp_path: Path) -> None:
    records = _mixed(40)
    one, two = tmp_path / "1.jsonl", tmp_path / "2.jsonl"
    write_lines(one, records[:25])
    write_lines(two, records[25:])
    with open(two, "a") as f:
        f.write("garbage\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        db = Database.load([one, str(two), DATA / "v0_9_old.jsonl"], top_k=2)
    assert len(caught) == 1 and "2.jsonl" in str(caught[0].message)
    assert len(db) == 44
    assert [r.records for r in db.reports] == [25, 15, 4]
    assert db.reports[1].bad_lines == (16,)
    single = Database(top_k=2)
    single.add_all(records)
    assert db.best(WKEY, TARGET, 2) == single.best(WKEY, TARGET, 2)


def test_progress_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("logs._io._PROGRESS_EVERY", 10)
    path = tmp_path / "log.jsonl"
    write_lines(path, _mixed(35))
    calls: list[tuple[int, int]] = []
    Database.load(path, progress=lambda done, total: calls.append((done, total)))
    size = path.stat().st_size
    assert len(calls) == 4 and calls[-1] == (size, size)
    assert all(0 < done <= size for done, _ in calls)


def test_memory_holds_only_the_top_k(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    write_lines(path, [make_record(1000.0 - i, trial=i, tag=i) for i in range(300)])
    db = Database.load(path, top_k=2)
    kept = list(db.best_records())
    assert len(kept) == 2 and [r.prov.trial for r in kept] == [299, 298]
    assert db.stats(WKEY, TARGET).count == 300  # type: ignore[union-attr]
