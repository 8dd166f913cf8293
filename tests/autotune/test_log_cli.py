"""``graphtune distill`` and ``graphtune log show`` through the root CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from autotune.cli import main
from logs import Status, read_records
from tests.logs.helpers import TARGET, TARGET2, WKEY, WKEY2, make_record, write_lines


@pytest.fixture
def run_log(tmp_path: Path) -> Path:
    path = tmp_path / "run.jsonl"
    write_lines(
        path,
        [
            make_record(300.0, trial=0),
            make_record(200.0, trial=1, tag=1),
            make_record(None, status=Status.CAPACITY, trial=2),
            make_record(None, status=Status.CAPACITY, trial=3),
            make_record(None, status=Status.TIMEOUT, trial=4, target=TARGET2),
            make_record(55.5, key=WKEY2, model="bert-base", batch=1, trial=5),
        ],
    )
    return path


def _invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_distill_prints_what_it_kept(run_log: Path, tmp_path: Path) -> None:
    out = tmp_path / "best.jsonl"
    code, stdout, stderr = _invoke("distill", "-i", str(run_log), "-o", str(out), "--top", "2")
    assert code == 0, stderr
    assert "bert-base" in stdout and "55.5" in stdout and "200.0" in stdout
    assert "kept 3 of 6 record(s) for 2 (workload, target) pair(s)" in stdout
    assert "1 pair(s) had no valid record" in stdout
    kept = list(read_records(out))
    assert [r.result.latency_us for r in kept] == [200.0, 300.0, 55.5]
    code, stdout, _ = _invoke("distill", "-i", str(run_log), "-o", str(out), "--top", "2")
    assert code == 0 and "merged with its previous content" in stdout
    assert list(read_records(out)) == kept


def test_distill_takes_several_inputs_after_one_flag(run_log: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.jsonl"
    write_lines(other, [make_record(10.0, tag=5)])
    out = tmp_path / "best.jsonl"
    code, _, stderr = _invoke("distill", "-i", str(run_log), str(other), "-o", str(out))
    assert code == 0, stderr
    assert [r.result.latency_us for r in read_records(out)] == [10.0, 55.5]


def test_log_show(run_log: Path) -> None:
    code, stdout, stderr = _invoke("log", "show", str(run_log))
    assert code == 0, stderr
    assert "capacity 2" in stdout and "timeout 1" in stdout
    assert "6 record(s), 2 workload(s), 3 (workload, target) pair(s)" in stdout
    assert WKEY[:12] in stdout and TARGET.hash[:8] in stdout
    assert "2025-11-22 04:18:00" in stdout  # when the best was measured (UTC)


def test_torn_line_is_a_warning_not_an_error(run_log: Path) -> None:
    with open(run_log, "a") as f:
        f.write(make_record().to_line()[:90])
    code, stdout, stderr = _invoke("log", "show", str(run_log))
    assert code == 0
    assert stderr.startswith("graphtune: warning: ") and "line 7 is a torn last line" in stderr
    assert "6 record(s)" in stdout


@pytest.mark.parametrize("kind", ["garbage", "newer", "missing"])
def test_bad_file_is_one_line_and_exit_2(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "bad.jsonl"
    if kind == "garbage":
        path.write_bytes(b"\x08\x01ONNX\x00\nmore\n")
    elif kind == "newer":
        obj = json.loads(make_record().to_line())
        obj["v"] = "2.0"
        path.write_text(json.dumps(obj) + "\n")
    for args in (("log", "show", str(path)), ("distill", "-i", str(path), "-o", str(tmp_path / "o"))):
        code, stdout, stderr = _invoke(*args)
        assert code == 2
        lines = stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("graphtune: error: ")
        assert "Traceback" not in stdout + stderr
        assert {"garbage": "not a graphtune log", "newer": "upgrade graphtune", "missing": "cannot read"}[
            kind
        ] in lines[0]
    assert not (tmp_path / "o").exists()


def test_distill_needs_inputs(tmp_path: Path) -> None:
    code, _, stderr = _invoke("distill", "-o", str(tmp_path / "o.jsonl"))
    assert code == 2 and "no input logs" in stderr


def _hosts(tmp_path: Path) -> Path:
    """Logs of three hosts of a farm, one target; host c tuned two workloads."""
    farm = tmp_path / "farm"
    farm.mkdir()
    write_lines(farm / "a.jsonl", [make_record(300.0, trial=0), make_record(250.0, trial=1)])
    write_lines(farm / "b.jsonl", [make_record(200.0, trial=0, study="b"),
                                   make_record(None, status=Status.CAPACITY, trial=1, study="b")])
    write_lines(farm / "c.jsonl", [make_record(400.0, trial=0, study="c"),
                                   make_record(55.5, key=WKEY2, model="bert-base", batch=1,
                                               trial=1, study="c")])
    (farm / "notes.txt").write_text("not a log\n")
    return farm


def test_distill_merges_a_directory_or_glob_and_counts_records_per_input(tmp_path: Path) -> None:
    farm = _hosts(tmp_path)
    out = farm / "best.jsonl"
    code, stdout, stderr = _invoke("distill", str(farm), "-o", str(out))
    assert code == 0, stderr
    assert [r.result.latency_us for r in read_records(out)] == [200.0, 55.5]
    line = next(x for x in stdout.splitlines() if WKEY[:12] in x and "a.jsonl" in x)
    assert f"{farm / 'a.jsonl'}: 2, {farm / 'b.jsonl'}: 2, {farm / 'c.jsonl'}: 1" in line
    (bert,) = [x for x in stdout.splitlines() if WKEY2[:12] in x and ".jsonl:" in x]
    assert f"{farm / 'c.jsonl'}: 1" in bert and "a.jsonl" not in bert
    # Again, by pattern: the output in the same directory is merged, not read as an input.
    code, stdout, stderr = _invoke("distill", str(farm / "*.jsonl"), "-o", str(out))
    assert code == 0, stderr
    assert "merged with its previous content" in stdout and "best.jsonl:" not in stdout
    assert [r.result.latency_us for r in read_records(out)] == [200.0, 55.5]
    code, _, stderr = _invoke("distill", str(tmp_path / "nohost*.jsonl"), "-o", str(out))
    assert code == 2 and "no log matches" in stderr and len(stderr.strip().splitlines()) == 1


def test_distill_never_mixes_targets_in_one_file(tmp_path: Path) -> None:
    farm = _hosts(tmp_path)
    write_lines(farm / "d.jsonl", [make_record(90.0, target=TARGET2, study="d")])
    out = tmp_path / "best.jsonl"
    code, stdout, stderr = _invoke("distill", str(farm), "-o", str(out))
    lines = stderr.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "2 targets" in lines[0] and "--per-target" in lines[0]
    assert TARGET.hash[:8] in lines[0] and TARGET2.hash[:8] in lines[0] and not out.exists()
    code, stdout, stderr = _invoke("distill", str(farm), "-o", str(out), "--per-target")
    assert code == 0, stderr
    one = tmp_path / f"best.{TARGET.chip}-{TARGET.hash[:8]}.jsonl"
    two = tmp_path / f"best.{TARGET2.chip}-{TARGET2.hash[:8]}.jsonl"
    assert {r.target for r in read_records(one)} == {TARGET}
    assert [r.result.latency_us for r in read_records(two)] == [90.0]
    assert not out.exists() and str(one) in stdout and str(two) in stdout


# ---- log show --csv / --json / --top, logs.to_dataframe (issue 21) ----------------------------
def test_log_show_csv_is_one_row_per_record(run_log: Path) -> None:
    import csv
    import io

    from logs import ROW_FIELDS

    code, stdout, stderr = _invoke("log", "show", str(run_log), "--csv")
    assert code == 0, stderr
    rows = list(csv.DictReader(io.StringIO(stdout)))
    assert len(rows) == 6 and tuple(rows[0]) == ROW_FIELDS
    assert [r["trial"] for r in rows] == ["0", "1", "2", "3", "4", "5"]
    assert rows[0]["task"] == "resnet50@b8" and rows[5]["task"] == "bert-base@b1"
    assert rows[1]["latency_us"] == "200.0" and rows[2]["status"] == "capacity"
    assert rows[2]["latency_us"] == "" and rows[2]["error"]
    assert rows[0]["candidate"] != rows[1]["candidate"]  # different schedules (tag)
    assert rows[0]["time_utc"].endswith("Z") and rows[4]["target"].startswith(TARGET2.chip)
    assert {r["latency_over_bound"] for r in rows} == {""}  # these records carry no bound


def test_a_fresh_tunes_log_has_latency_over_bound(tiny_onnx: Path, tmp_path: Path) -> None:
    """Every record a tune writes carries the task's roofline bound (record version 1.2),
    so log show's latency/bound column is a number >= 1 on every ok row."""
    import csv
    import io

    log = tmp_path / "t.jsonl"
    code, _, stderr = _invoke("tune", str(tiny_onnx), "--trials", "6", "--workers", "0",
                              "--log", str(log), "--seed", "0")
    assert code == 0, stderr
    code, stdout, stderr = _invoke("log", "show", str(log), "--csv")
    assert code == 0, stderr
    rows = list(csv.DictReader(io.StringIO(stdout)))
    ok = [r for r in rows if r["status"] == "ok"]
    assert len(rows) == len(list(read_records(log))) and len(ok) >= 6
    assert all(float(r["latency_over_bound"]) >= 1.0 for r in ok), ok
    bounds = {rec.result.lower_bound_us for rec in read_records(log) if rec.is_valid}
    assert len(bounds) == 1 and next(iter(bounds)) > 0  # one task: one bound
    best = json.loads(_invoke("log", "show", str(log), "--top", "1", "--json")[1])
    assert best[0]["latency_over_bound"] == pytest.approx(
        best[0]["latency_us"] / next(iter(bounds)))


def test_log_show_top_and_json(run_log: Path) -> None:
    code, stdout, stderr = _invoke("log", "show", str(run_log), "--top", "1", "--json")
    assert code == 0, stderr
    rows = json.loads(stdout)
    # the best valid record of each (workload, target) pair that has one
    assert [(r["task"], r["latency_us"]) for r in rows] == [("resnet50@b8", 200.0),
                                                          ("bert-base@b1", 55.5)]
    code, stdout, _ = _invoke("log", "show", str(run_log), "--top", "2")
    assert code == 0 and "3 record(s)" in stdout and "300.0" in stdout
    code, _, stderr = _invoke("log", "show", str(run_log), "--json", "--csv")
    assert code == 2 and stderr.startswith("graphtune: error: ")


def test_to_dataframe(run_log: Path) -> None:
    pd = pytest.importorskip("pandas")
    import logs

    df = logs.to_dataframe(run_log)
    assert len(df) == 6 and list(df.columns) == list(logs.ROW_FIELDS)
    assert df[df.status == "ok"].groupby("task").latency_us.min().to_dict() == {
        "bert-base@b1": 55.5, "resnet50@b8": 200.0}
    assert isinstance(df.time_utc.dtype, pd.DatetimeTZDtype)
    assert len(logs.to_dataframe([run_log, run_log], top=1)) == 2
