"""Record value types, the line format, versions and the structure check."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from logs import (
    SCHEMA_VERSION,
    LogError,
    NewerVersionError,
    Provenance,
    Record,
    Result,
    Status,
    TargetKey,
    WorkloadInfo,
    parse_target_key,
    target_key_str,
    validate,
)
from logs._schema import check_record, split_line
from tests.logs.helpers import TARGET, WKEY, make_record


@pytest.mark.parametrize("status", list(Status))
def test_json_round_trip_every_status(status: Status) -> None:
    rec = make_record(1234.5 if status is Status.OK else None, status=status)
    obj = rec.to_json()
    assert obj["v"] == SCHEMA_VERSION
    assert list(obj)[-1] == "schedule"
    assert Record.from_json(json.loads(json.dumps(obj))) == rec
    assert Record.from_json(json.loads(rec.to_line())) == rec


def test_line_is_one_line_with_crc_last() -> None:
    line = make_record(error="multi\nline message").to_line()
    assert line.endswith("\n") and line.count("\n") == 1
    obj = json.loads(line)
    assert list(obj)[-2:] == ["schedule", "crc32"]
    head, sched = split_line(line.encode())  # type: ignore[misc]
    assert "schedule" not in head and json.loads(sched) == obj["schedule"]


def test_split_line_rejects_damaged_and_foreign_lines() -> None:
    line = make_record().to_line().encode()
    assert split_line(line) is not None
    assert split_line(line.replace(b'"batch":8}', b'"batch":9}')) is None  # edited schedule
    assert split_line(line.replace(b"resnet50", b"resnet51")) is None  # edited header
    assert split_line(line[:-40]) is None  # torn
    no_crc = json.dumps(make_record().to_json()).encode()
    assert split_line(no_crc) is None


def test_key_helpers() -> None:
    assert target_key_str("STCP920", "ab12") == "STCP920:ab12"
    assert parse_target_key("STCP920:ab12") == TargetKey("STCP920", "ab12")
    assert str(TARGET) == f"STCP920:{TARGET.hash}"
    for bad in ("STCP920", ":ab", "STCP920:", "a:b:c"):
        with pytest.raises(LogError, match="bad target key"):
            parse_target_key(bad)
    assert make_record().index_key == (WKEY, "STCP920", TARGET.hash)


def test_constructor_checks() -> None:
    with pytest.raises(ValueError, match="latency_us > 0"):
        Result(Status.OK)
    with pytest.raises(ValueError, match="finite"):
        Result(Status.OK, latency_us=float("nan"))
    with pytest.raises(ValueError, match="'v' and 'batch'"):
        Record(WorkloadInfo(WKEY), TARGET, {"v": "1.0"}, Result(Status.TIMEOUT), Provenance())
    with pytest.raises(ValueError, match="clash"):
        WorkloadInfo(WKEY, extra={"batch": 3})
    with pytest.raises(ValueError, match="non-empty"):
        TargetKey("STCP920", "")
    with pytest.raises(ValueError, match="batch"):
        make_record(batch=0).to_line()  # constructible, but the writer refuses it


def test_malformed_object_names_the_problem() -> None:
    obj = make_record().to_json()
    obj["result"]["status"] = "exploded"
    with pytest.raises(LogError, match=r"result\.status 'exploded'"):
        Record.from_json(obj)


def test_newer_major_is_refused_newer_minor_keeps_extras() -> None:
    obj = make_record().to_json()
    with pytest.raises(NewerVersionError, match=r"version 2\.0, newer than this graphtune \(1\.x\)"):
        Record.from_json({**obj, "v": "2.0"})
    future: dict[str, Any] = copy.deepcopy(obj)
    future["v"] = "1.7"
    future["energy_uj"] = 3.5
    future["workload"]["opset"] = 17
    future["result"]["peak_l1_bytes"] = 12
    future["prov"]["git"] = "abc"
    rec = Record.from_json(future)
    assert rec.version == "1.7" and rec.extra == {"energy_uj": 3.5}
    assert rec.workload.extra == {"opset": 17} and rec.result.extra == {"peak_l1_bytes": 12}
    again = json.loads(rec.to_line())
    del again["crc32"]
    assert again == future


def test_0_9_record_is_upgraded() -> None:
    old = {
        "version": "0.9",
        "workload_key": WKEY,
        "model": "m",
        "input_shapes": {"x": [1, 4]},
        "batch": 1,
        "target": "STCP920:beef",
        "schedule": {"v": "0.9", "batch": 1},
        "latency_us": -1,
        "throughput": -1,
        "error_no": 5,
        "error_msg": "lost",
        "measurer": "sim@0.0.9",
        "trial": 3,
        "timestamp": 1700000000,
    }
    rec = Record.from_json(old)
    assert rec.version == "1.0"
    assert rec.target == TargetKey("STCP920", "beef")
    assert rec.result == Result(Status.WORKER_LOST, None, None, "lost")
    assert (rec.prov.measurer, rec.prov.measurer_version, rec.prov.trial) == ("sim", "0.0.9", 3)
    with pytest.raises(LogError, match=r"result\.status"):
        Record.from_json({**old, "error_no": 42})


def test_rank_key_orders_latency_then_time_then_text() -> None:
    a = make_record(100.0, time_s=5.0, tag=1)
    b = make_record(100.0, time_s=4.0, tag=2)
    c = make_record(100.0, time_s=4.0, tag=3)
    d = make_record(99.0, time_s=9.0)
    ranked = sorted([a, b, c, d], key=Record.rank_key)
    assert ranked[0] == d and ranked[-1] == a
    assert {ranked[1].schedule["groups"][0]["ops"][1], ranked[2].schedule["groups"][0]["ops"][1]} == {
        12,
        13,
    }
    assert ranked[1].canonical() < ranked[2].canonical()


def test_provenance_now_stamps_time_and_host() -> None:
    prov = Provenance.now(tuner="manual")
    assert prov.time_unix_s > 1.7e9 and prov.host and prov.tuner == "manual"


def _variants() -> list[tuple[dict[str, Any], bool]]:
    good = make_record().to_json()
    cases: list[tuple[dict[str, Any], bool]] = [(good, True)]
    failed = make_record(None, status=Status.CAPACITY).to_json()
    cases.append((failed, True))
    edits = [
        ("workload", "key", ""),
        ("workload", "batch", 0),
        ("workload", "batch", "8"),
        ("workload", "input_shapes", {"x": [1, "2"]}),
        ("target", "chip", "a:b"),
        ("target", "hash", ""),
        ("result", "status", "bogus"),
        ("result", "latency_us", -1.0),
        ("result", "latency_us", None),
        ("result", "latency_us", 0),
        ("result", "throughput_per_s", "fast"),
        ("result", "error", 3),
        ("prov", "time_unix_s", "yesterday"),
        ("prov", "trial", 1.5),
        ("prov", "host", None),
    ]
    for section, key, value in edits:
        bad = copy.deepcopy(good)
        bad[section][key] = value
        cases.append((bad, False))
    for drop in ("workload", "target", "result", "prov", "schedule"):
        bad = copy.deepcopy(good)
        del bad[drop]
        cases.append((bad, False))
    bad = copy.deepcopy(good)
    bad["target"]["extra"] = 1
    cases.append((bad, False))
    bad = copy.deepcopy(good)
    del bad["schedule"]["batch"]
    cases.append((bad, False))
    return cases


@pytest.mark.parametrize(("obj", "ok"), _variants())
def test_fast_check_agrees_with_json_schema(obj: dict[str, Any], ok: bool) -> None:
    assert (check_record(obj) is None) is ok
    if ok:
        validate(obj)
    else:
        with pytest.raises(LogError, match="malformed record"):
            validate(obj)


def test_importing_logs_stays_light() -> None:
    import subprocess
    import sys

    heavy = ("tvm", "onnx", "ray", "optuna", "xgboost", "jsonschema", "sim", "autotune", "numpy")
    code = (
        "import sys, logs; "
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {heavy!r}), "
        "sorted(m for m in sys.modules if m.startswith('compiler')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # from compiler only the root of the error hierarchy and the one atomic writer (its
    # __init__ is lazy)
    assert out.stdout.strip() == "[] ['compiler', 'compiler.errors', 'compiler.files']"


def test_1_1_provenance_params_and_cost_model_round_trip() -> None:
    prov = Provenance.now(tuner="graphtune-guided", study="s", trial=3,
                          params={"split@0": 4, "order": "depth"}, cost_model="xgb/n=64")
    rec = Record(WorkloadInfo(WKEY), TARGET, {"v": "1.0", "batch": 8}, Result(Status.OK, 10.0), prov)
    obj = json.loads(rec.to_line())
    assert obj["v"] == SCHEMA_VERSION and obj["prov"]["params"] == {"split@0": 4, "order": "depth"}
    assert obj["prov"]["cost_model"] == "xgb/n=64"
    assert Record.from_json(obj) == rec
    validate(obj)
    bad = copy.deepcopy(obj)
    bad["prov"]["params"] = [1, 2]
    assert check_record(bad) == "prov.params must be an object"


def test_1_0_record_without_the_1_1_keys_writes_back_unchanged() -> None:
    obj = make_record().to_json()
    obj["v"] = "1.0"
    rec = Record.from_json(obj)
    assert "params" not in rec.to_json()["prov"] and "cost_model" not in rec.to_json()["prov"]
    assert rec.to_json() == obj


def test_1_2_result_lower_bound_round_trips_and_is_checked() -> None:
    res = Result(Status.OK, 10.0, 800.0, lower_bound_us=4.0)
    rec = Record(WorkloadInfo(WKEY), TARGET, {"v": "1.0", "batch": 8}, res, Provenance.now())
    obj = json.loads(rec.to_line())
    assert obj["v"] == "1.2" and obj["result"]["lower_bound_us"] == 4.0
    assert Record.from_json(obj) == rec and Record.from_json(obj).result.lower_bound_us == 4.0
    validate(obj)
    for wrong in (-1.0, "4", True):
        bad = copy.deepcopy(obj)
        bad["result"]["lower_bound_us"] = wrong
        assert check_record(bad) == "result.lower_bound_us must be a finite number >= 0 or null"
    with pytest.raises(ValueError, match="lower_bound_us"):
        Result(Status.OK, 10.0, lower_bound_us=float("nan"))


def test_1_1_record_without_a_bound_writes_back_unchanged() -> None:
    obj = make_record().to_json()
    obj["v"] = "1.1"
    rec = Record.from_json(obj)
    assert rec.result.lower_bound_us is None and "lower_bound_us" not in rec.to_json()["result"]
    assert rec.to_json() == obj
