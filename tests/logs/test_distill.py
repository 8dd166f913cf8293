"""distill: best valid K per (workload, target), merging, idempotence."""

from __future__ import annotations

import random
import warnings
from pathlib import Path

import pytest

from logs import Database, LogError, Record, Status, distill, read_records
from tests.logs.helpers import T0, TARGET, TARGET2, WKEY, WKEY2, make_record, write_lines


def _log(path: Path, n: int, seed: int) -> list[Record]:
    rng = random.Random(seed)
    records = []
    for i in range(n):
        failed = rng.random() < 0.3
        records.append(
            make_record(
                None if failed else float(rng.randint(50, 500)),
                status=rng.choice([Status.CAPACITY, Status.TIMEOUT]) if failed else Status.OK,
                key=rng.choice([WKEY, WKEY2]),
                target=rng.choice([TARGET, TARGET2]),
                time_s=T0 + rng.randint(0, 20),
                trial=i,
                study=f"s{seed}",
                tag=rng.randint(0, 4),
            )
        )
    write_lines(path, records)
    return records


def test_keeps_the_best_valid_k_per_workload_and_target(tmp_path: Path) -> None:
    a = _log(tmp_path / "a.jsonl", 80, seed=1)
    b = _log(tmp_path / "b.jsonl", 80, seed=2)
    out = tmp_path / "best.jsonl"
    summary = distill([tmp_path / "a.jsonl", tmp_path / "b.jsonl"], out, top_k=2)
    kept = list(read_records(out))
    assert all(r.is_valid for r in kept)
    expected: dict[tuple[str, str, str], list[Record]] = {}
    for r in sorted((r for r in a + b if r.is_valid), key=Record.rank_key):
        group = expected.setdefault(r.index_key, [])
        if len(group) < 2 and all(g.canonical() != r.canonical() for g in group):
            group.append(r)
    assert kept == [r for key in sorted(expected) for r in expected[key]]
    assert summary.records_read == 160 and summary.records_written == len(kept)
    assert [(row.workload.key, row.target.chip, row.target.hash) for row in summary.rows] == sorted(
        expected
    )
    assert all(row.kept == 2 and row.best_latency_us is not None for row in summary.rows)
    assert not summary.merged_existing


def test_never_keeps_an_invalid_record_and_never_mixes_targets(tmp_path: Path) -> None:
    records = [
        make_record(None, status=Status.CAPACITY, target=TARGET),
        make_record(1.0, status=Status.SIM_ERROR, target=TARGET, trial=1),
        make_record(900.0, target=TARGET2, trial=2),
        make_record(None, status=Status.WORKER_LOST, key=WKEY2),
    ]
    write_lines(tmp_path / "in.jsonl", records)
    summary = distill([tmp_path / "in.jsonl"], tmp_path / "out.jsonl", top_k=5)
    assert list(read_records(tmp_path / "out.jsonl")) == [records[2]]
    rows = {(row.workload.key, row.target): row for row in summary.rows}
    assert rows[WKEY, TARGET].kept == 0 and rows[WKEY, TARGET].records == 2
    assert rows[WKEY, TARGET2].kept == 1
    assert rows[WKEY2, TARGET].kept == 0 and rows[WKEY2, TARGET].best_latency_us is None


def test_idempotent(tmp_path: Path) -> None:
    _log(tmp_path / "a.jsonl", 120, seed=3)
    best = tmp_path / "best.jsonl"
    distill([tmp_path / "a.jsonl"], best, top_k=3)
    first = best.read_bytes()
    distill([best], tmp_path / "again.jsonl", top_k=3)  # distilling its own output
    assert (tmp_path / "again.jsonl").read_bytes() == first
    distill([tmp_path / "a.jsonl"], best, top_k=3)  # the same inputs merged into the output
    assert best.read_bytes() == first
    summary = distill([best], best, top_k=3)  # the output into itself
    assert best.read_bytes() == first and summary.merged_existing


def test_merges_into_an_existing_output(tmp_path: Path) -> None:
    old_best = make_record(10.0, study="old", tag=1)
    old_worse = make_record(900.0, key=WKEY2, study="old")
    out = tmp_path / "best.jsonl"
    write_lines(out, [old_best, old_worse])
    new = [make_record(50.0, study="new"), make_record(40.0, key=WKEY2, study="new")]
    write_lines(tmp_path / "new.jsonl", new)
    summary = distill([tmp_path / "new.jsonl"], out, top_k=1)
    kept = {r.workload_key: r for r in read_records(out)}
    assert kept[WKEY] == old_best and kept[WKEY2] == new[1]
    rows = {row.workload.key: row for row in summary.rows}
    assert rows[WKEY].previous_best_latency_us == 10.0 and rows[WKEY].best_latency_us == 10.0
    assert rows[WKEY2].previous_best_latency_us == 900.0 and rows[WKEY2].best_latency_us == 40.0
    assert summary.merged_existing


def test_refuses_to_overwrite_an_output_that_is_not_a_clean_log(tmp_path: Path) -> None:
    write_lines(tmp_path / "in.jsonl", [make_record()])
    model = tmp_path / "model.onnx"
    model.write_bytes(b"\x08\x07\x12\x04onnx\n\x00\x01binary")
    with pytest.raises(LogError, match="not a graphtune log"):
        distill([tmp_path / "in.jsonl"], model)
    assert model.read_bytes() == b"\x08\x07\x12\x04onnx\n\x00\x01binary"
    damaged = tmp_path / "best.jsonl"
    damaged.write_text(make_record().to_line() + "oops\n")
    with warnings.catch_warnings(record=True), pytest.raises(LogError, match="refusing to overwrite"):
        distill([tmp_path / "in.jsonl"], damaged)
    assert damaged.read_text().endswith("oops\n")
    with pytest.raises(LogError, match="directory"):
        distill([tmp_path / "in.jsonl"], tmp_path)
    with pytest.raises(LogError, match="at least one input"):
        distill([], tmp_path / "x.jsonl")


def test_bad_input_leaves_the_output_untouched(tmp_path: Path) -> None:
    out = tmp_path / "best.jsonl"
    write_lines(out, [make_record()])
    before = out.read_bytes()
    with pytest.raises(LogError, match="cannot read log"):
        distill([tmp_path / "missing.jsonl"], out)
    assert out.read_bytes() == before
    assert len(Database.load(out)) == 1
