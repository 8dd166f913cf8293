"""The JSON layout of a ``GraphSchedule`` as a JSON Schema, with bounds.

:meth:`compiler.schedule.GraphSchedule.from_json` checks a decoded schedule
against :data:`SCHEDULE_SCHEMA` before it builds anything from it, so a hostile
file cannot make it allocate without limit (``"ops": [[0, 10**12]]`` would
expand to a trillion op indices) or fail with a Python exception instead of a
:class:`~compiler.errors.ScheduleError`. The bounds are far above any real
model (ResNet-50 has about 180 ops, BERT-large about 1,500) and below what
would exhaust memory.

Unknown keys are allowed (and ignored), so a newer graphtune can add optional
keys without breaking older readers; a layout change bumps the version.
"""

from __future__ import annotations

from typing import Any

from compiler.errors import ScheduleError

MAX_SCHEDULE_BYTES = 8 << 20
"""Largest schedule file read (a ResNet-50 schedule is about 40 kB)."""
MAX_OPS = 1 << 18
"""Largest number of ops a schedule may name, in all groups together."""
MAX_BATCH = 1 << 20
MAX_CHUNKS = 1 << 16
"""Most chunks of one group (its split factor) and most chunks a transfer names."""
MAX_CORE = 1 << 12
"""Core ids are below this (the STCP920 has 8 per cluster)."""
MAX_STEPS = 1 << 20
MAX_NAME = 256
MAX_TEXT = 4096

_NAME = {"type": "string", "maxLength": MAX_NAME}
_INDEX = {"type": "integer", "minimum": 0, "maximum": MAX_OPS - 1}
_CORE = {"type": "integer", "minimum": 0, "maximum": MAX_CORE - 1}
_CORES = {"type": "array", "minItems": 1, "maxItems": MAX_CORE}
_SCOPE = {
    "description": "DDR, LLB or L1 (or 0, 1, 2)",
    "anyOf": [
        {"type": "string", "maxLength": 32},
        {"type": "integer", "minimum": 0, "maximum": 2},
    ]
}
_CORE_BIND = {
    "description": f"a list of core ids, or of lists of core ids (ids 0 to {MAX_CORE - 1})",
    "anyOf": [
        _CORE,
        {**_CORES, "items": {"anyOf": [_CORE, {**_CORES, "items": _CORE}]}},
    ]
}
_PLACEMENT_PROPS = {"mem_scope": _SCOPE, "core_bind": _CORE_BIND}
_CHUNK_LIST = {"type": "array", "maxItems": MAX_CHUNKS,
               "items": {"type": "integer", "minimum": 0, "maximum": MAX_CHUNKS - 1}}
_FACTOR = {"type": "integer", "minimum": 1, "maximum": MAX_CHUNKS}

SCHEDULE_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "graphtune GraphSchedule",
    "type": "object",
    "required": ["v", "batch", "groups", "transfers", "order"],
    "properties": {
        "kind": {"const": "graphtune.GraphSchedule"},
        "v": {"type": "integer", "minimum": 1},
        "batch": {"type": "integer", "minimum": 1, "maximum": MAX_BATCH},
        "workload_key": {"type": ["string", "null"], "maxLength": MAX_NAME},
        "source": {"type": "string", "maxLength": MAX_TEXT},
        "groups": {
            "type": "array",
            "maxItems": MAX_OPS,
            "items": {
                "type": "object",
                "required": ["name", "ops", "split", "chunks"],
                "properties": {
                    "name": _NAME,
                    "ops": {
                        "type": "array",
                        "maxItems": MAX_OPS,
                        "items": {"type": "array", "minItems": 2, "maxItems": 2,
                                  "prefixItems": [_INDEX, _INDEX]},
                    },
                    "split": _FACTOR,
                    "chunks": {
                        "type": "array",
                        "maxItems": MAX_CHUNKS,
                        "items": {"type": "object", "required": ["mem_scope", "core_bind"],
                                  "properties": _PLACEMENT_PROPS},
                    },
                },
            },
        },
        "transfers": {
            "type": "array",
            "maxItems": MAX_STEPS,
            "items": {
                "type": "object",
                "required": ["name", "kind", "tensor", "src_factor", "dst_factor",
                             "src_chunks", "dst_chunks", "mem_scope", "core_bind"],
                "properties": {
                    "name": _NAME,
                    "kind": {"enum": ["split", "concat"]},
                    "tensor": {"type": "string", "maxLength": MAX_TEXT},
                    "src_factor": _FACTOR,
                    "dst_factor": _FACTOR,
                    "src_chunks": _CHUNK_LIST,
                    "dst_chunks": _CHUNK_LIST,
                    **_PLACEMENT_PROPS,
                },
            },
        },
        "order": {
            "type": "array",
            "maxItems": MAX_STEPS,
            "items": {
                "description": "['g', group, chunk] or ['t', transfer]",
                "anyOf": [
                    {"type": "array", "minItems": 3, "maxItems": 3,
                     "prefixItems": [{"const": "g"}, _NAME,
                                     {"type": "integer", "minimum": 0,
                                      "maximum": MAX_CHUNKS - 1}]},
                    {"type": "array", "minItems": 2, "maxItems": 2,
                     "prefixItems": [{"const": "t"}, _NAME]},
                ]
            },
        },
    },
}
"""A schedule file's layout (draft 2020-12), bounds included."""

_validator: Any = None


def check_schedule_json(d: Any) -> None:
    """Check a decoded schedule against :data:`SCHEDULE_SCHEMA` and the op budget.

    Raises:
        ScheduleError: The first problem, as one line naming where it is.
    """
    global _validator
    import jsonschema

    from compiler._json_schema import first_problem

    if _validator is None:
        _validator = jsonschema.Draft202012Validator(SCHEDULE_SCHEMA)
    problem = first_problem(_validator, d, "schedule")
    if problem:
        raise ScheduleError(problem)
    total = 0
    for g in d["groups"]:
        for first, last in g["ops"]:
            if first > last:
                raise ScheduleError(
                    f"group {g['name'][:64]}: bad op range [{first}, {last}]: use [first, last]"
                )
            total += last - first + 1
    if total > MAX_OPS:
        raise ScheduleError(
            f"schedule: its groups name {total} ops in all, more than the {MAX_OPS} any "
            "model has: the op ranges are wrong"
        )
