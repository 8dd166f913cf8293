"""``logs.ScheduleText``: a schedule's JSON object carried as its log line's text.

A record whose schedule is a ScheduleText writes the same line, byte for byte, as the
record with the object it stands for; readers read the line the same; to every reader
in memory it is that object (a read-only Mapping).
"""

from __future__ import annotations

import json
import pickle
from typing import Any

import pytest

from logs import (
    Provenance,
    Record,
    RecordWriter,
    Result,
    ScheduleText,
    Status,
    TargetKey,
    WorkloadInfo,
    read_records,
)
from logs._schema import split_line

_OBJ: dict[str, Any] = {
    "kind": "graph_schedule", "v": 3, "batch": 8, "workload_key": None, "source": "x",
    "groups": [{"name": "g0", "ops": [[0, 2]], "split": 2, "chunks": [{"mem_scope": "L1"}]}],
    "transfers": [], "order": [["g", "g0", 0], ["t", "é\"\\\n"]],
}


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _record(schedule: Any) -> Record:
    return Record(WorkloadInfo("ab12", "bert", {"x": (8, 128)}, 8), TargetKey("STCP920", "9f3c"),
                  schedule, Result(Status.OK, latency_us=917.25, lower_bound_us=3.5),
                  Provenance(tuner="graphtune-guided", study="s", trial=4, time_unix_s=12.5,
                             host="h", params={"p0": 1, "p1": "a"}, cost_model="xgb/40"))


@pytest.mark.parametrize("obj", [
    _OBJ,
    {k: v for k, v in _OBJ.items() if k != "source"},  # no source: with_source appends it
    {"source": "first", "v": 1, "batch": 1},
    {"v": 1, "batch": 2, "source": "last"},
])
def test_text_is_the_objects_json_and_with_source_splices_it(obj: dict[str, Any]) -> None:
    t = ScheduleText.of(obj)
    assert t.text == _dumps(obj)
    for source in ("tuner:study/12", "", "ünï\"code\\", "x" * 300):
        s = t.with_source(source)
        assert s.text == _dumps({**obj, "source": source})
        assert s["source"] == source and dict(s) == {**obj, "source": source}
        assert s.with_source("again").text == _dumps({**obj, "source": "again"})


def test_it_reads_as_its_object() -> None:
    t = ScheduleText.of(_OBJ)
    assert t["v"] == 3 and "batch" in t and "nope" not in t and t.get("nope", 5) == 5
    assert t == _OBJ and _OBJ.__eq__(t) is NotImplemented and t == ScheduleText.of(dict(_OBJ))
    assert dict(t) == _OBJ and list(t) == list(_OBJ) and len(t) == len(_OBJ)
    assert t["groups"] == _OBJ["groups"] and t.to_json() is t
    back = pickle.loads(pickle.dumps(t))
    assert type(back) is ScheduleText and back.text == t.text and back == _OBJ
    assert back.with_source("y").text == _dumps({**_OBJ, "source": "y"})  # `at` travels too


def test_a_record_writes_the_same_line_and_reads_back_the_same(tmp_path: Any) -> None:
    for source in ("x", "tuner:s/4"):
        obj = {**_OBJ, "source": source}
        plain, text = _record(obj), _record(ScheduleText.of(_OBJ).with_source(source))
        assert text.to_line_bytes() == plain.to_line_bytes()
        assert text.canonical() == plain.canonical() and text == plain
        assert split_line(text.to_line_bytes()) is not None  # the fast reader's path holds
    path = tmp_path / "log.jsonl"
    with RecordWriter(path) as w:
        w.write(_record(_OBJ))
        w.write(_record(ScheduleText.of(_OBJ)))
    lines = path.read_bytes().splitlines()
    assert lines[0] == lines[1]
    got = list(read_records(path))
    assert len(got) == 2 and got[0] == got[1] and dict(got[1].schedule) == _OBJ


def test_a_text_without_its_keys_is_no_record() -> None:
    with pytest.raises(ValueError, match="'v' and 'batch'"):
        _record(ScheduleText.of({"v": 1}))


def test_keys_that_json_would_quote_are_refused_and_equal_objects_compare_equal() -> None:
    """A key that is no string would be written unquoted (a line that is not JSON, with a
    valid CRC): refused. Two texts of one object in another key order are equal, as dicts."""
    with pytest.raises(TypeError, match="keys are strings"):
        ScheduleText.of({"v": 1, "batch": 1, 2: 3})  # type: ignore[dict-item]
    a, b = ScheduleText.of({"v": 1, "batch": 2}), ScheduleText.of({"batch": 2, "v": 1})
    assert a.text != b.text and a == b and a != ScheduleText.of({"v": 1, "batch": 3})


def test_a_text_schedule_has_the_table_row_of_its_object() -> None:
    from logs._table import record_row
    assert record_row(_record(ScheduleText.of(_OBJ))) == record_row(_record(_OBJ))
