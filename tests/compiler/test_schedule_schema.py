"""The hand-written schedule check (the hot path) and the JSON Schema agree."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler._schedule_schema import SCHEDULE_SCHEMA, conforms

BAD = Path(__file__).resolve().parents[1] / "data" / "bad" / "schedule"
VALIDATOR = jsonschema.Draft202012Validator(SCHEDULE_SCHEMA)
GOOD: dict[str, Any] = {
    "kind": "graphtune.GraphSchedule", "v": 1, "batch": 16, "workload_key": "ab12", "source": "x",
    "groups": [
        {"name": "g0", "ops": [[0, 3], [5, 5]], "split": 2,
         "chunks": [{"mem_scope": "L1", "core_bind": [[0, 1], [2, 3]]},
                    {"mem_scope": 1, "core_bind": [4, 5, 6, 7]}]},
        {"name": "g1", "ops": [[4, 4]], "split": 1,
         "chunks": [{"mem_scope": "DDR", "core_bind": 3}]},
    ],
    "transfers": [{"name": "concat_0", "kind": "concat", "tensor": "t", "src_factor": 2,
                   "dst_factor": 1, "src_chunks": [0, 1], "dst_chunks": [0],
                   "mem_scope": "LLB", "core_bind": [[0, 1, 2, 3]]}],
    "order": [["g", "g0", 0], ["g", "g0", 1], ["t", "concat_0"], ["g", "g1", 0]],
}
ODD = [None, True, -1, 0, 1, 2, 3, 2**40, 1.5, "", "L1", "x" * 300, [], [0], [[0, 1]], [[]],
       {}, {"a": 1}, ["g", "g0", 0], ["t"], [-1, 2]]


def _paths(d: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(d, dict):
        for k, v in d.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(d, list):
        for i, v in enumerate(d):
            out += _paths(v, (*prefix, i))
    return out


PATHS = _paths(GOOD)[1:]


def _set(d: Any, path: tuple[Any, ...], value: Any) -> Any:
    d = copy.deepcopy(d)
    cur = d
    for k in path[:-1]:
        cur = cur[k]
    if value is _DELETE:
        del cur[path[-1]]
    else:
        cur[path[-1]] = value
    return d


_DELETE = object()


def test_the_good_schedule_and_the_corpus_agree() -> None:
    assert conforms(GOOD) and VALIDATOR.is_valid(GOOD)
    files = sorted(BAD.glob("*.json"))
    assert files
    for f in files:
        try:
            d = json.loads(f.read_text())
        except (ValueError, UnicodeDecodeError, RecursionError):
            continue
        assert conforms(d) == VALIDATOR.is_valid(d), f.name


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(PATHS), st.sampled_from([*ODD, _DELETE])),
                min_size=1, max_size=3))
def test_mutated_schedules_agree(edits: list[tuple[tuple[Any, ...], Any]]) -> None:
    d: Any = GOOD
    for path, value in edits:
        try:
            d = _set(d, path, value)
        except (KeyError, IndexError, TypeError):
            continue
    assert conforms(d) == VALIDATOR.is_valid(d), d
