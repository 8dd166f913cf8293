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


# ---- the same rules, hand-written for the hot path ----------------------------------------
# jsonschema takes ~100 ms on a ResNet-50 schedule; a tuner parses thousands per minute.
# conforms() states SCHEDULE_SCHEMA's rules in plain Python (a test keeps the two in
# agreement); jsonschema runs only to word the first problem of a schedule that fails.

def _is_int(v: Any, lo: int, hi: int | None = None) -> bool:
    return type(v) is int and v >= lo and (hi is None or v <= hi)


def _is_str(v: Any, n: int) -> bool:
    return type(v) is str and len(v) <= n


def _is_scope(v: Any) -> bool:
    return _is_str(v, 32) or _is_int(v, 0, 2)


def _is_core_bind(v: Any) -> bool:
    if _is_int(v, 0, MAX_CORE - 1):
        return True
    if type(v) is not list or not 1 <= len(v) <= MAX_CORE:
        return False
    for x in v:
        if _is_int(x, 0, MAX_CORE - 1):
            continue
        if type(x) is not list or not 1 <= len(x) <= MAX_CORE or \
                not all(_is_int(c, 0, MAX_CORE - 1) for c in x):
            return False
    return True


def _is_placement(d: dict[str, Any]) -> bool:
    return ("mem_scope" not in d or _is_scope(d["mem_scope"])) and \
        ("core_bind" not in d or _is_core_bind(d["core_bind"]))


def _is_chunk_list(v: Any) -> bool:
    return type(v) is list and len(v) <= MAX_CHUNKS and \
        all(_is_int(x, 0, MAX_CHUNKS - 1) for x in v)


def _is_group(g: Any) -> bool:
    if type(g) is not dict or not all(k in g for k in ("name", "ops", "split", "chunks")):
        return False
    if "name" in g and not _is_str(g["name"], MAX_NAME):
        return False
    ops = g["ops"]
    if type(ops) is not list or len(ops) > MAX_OPS:
        return False
    for r in ops:
        if type(r) is not list or len(r) != 2 or \
                not (_is_int(r[0], 0, MAX_OPS - 1) and _is_int(r[1], 0, MAX_OPS - 1)):
            return False
    if not _is_int(g["split"], 1, MAX_CHUNKS):
        return False
    chunks = g["chunks"]
    if type(chunks) is not list or len(chunks) > MAX_CHUNKS:
        return False
    return all(type(c) is dict and "mem_scope" in c and "core_bind" in c and _is_placement(c)
               for c in chunks)


_TRANSFER_KEYS = ("name", "kind", "tensor", "src_factor", "dst_factor", "src_chunks",
                  "dst_chunks", "mem_scope", "core_bind")


def _is_transfer(t: Any) -> bool:
    if type(t) is not dict or not all(k in t for k in _TRANSFER_KEYS):
        return False
    return (_is_str(t["name"], MAX_NAME) and t["kind"] in ("split", "concat")
            and _is_str(t["tensor"], MAX_TEXT) and _is_int(t["src_factor"], 1, MAX_CHUNKS)
            and _is_int(t["dst_factor"], 1, MAX_CHUNKS) and _is_chunk_list(t["src_chunks"])
            and _is_chunk_list(t["dst_chunks"]) and _is_placement(t))


def _is_step(s: Any) -> bool:
    if type(s) is not list:
        return False
    if len(s) == 3:
        return s[0] == "g" and type(s[0]) is str and _is_str(s[1], MAX_NAME) and \
            _is_int(s[2], 0, MAX_CHUNKS - 1)
    if len(s) == 2:
        return s[0] == "t" and type(s[0]) is str and _is_str(s[1], MAX_NAME)
    return False


def conforms(d: Any) -> bool:
    """Whether a decoded schedule satisfies :data:`SCHEDULE_SCHEMA` (fast, no jsonschema)."""
    if type(d) is not dict or not all(k in d for k in ("v", "batch", "groups", "transfers",
                                                        "order")):
        return False
    if "kind" in d and d["kind"] != "graphtune.GraphSchedule":
        return False
    if not _is_int(d["v"], 1) or not _is_int(d["batch"], 1, MAX_BATCH):
        return False
    wk = d.get("workload_key")
    if "workload_key" in d and wk is not None and not _is_str(wk, MAX_NAME):
        return False
    if "source" in d and not _is_str(d["source"], MAX_TEXT):
        return False
    groups, transfers, order = d["groups"], d["transfers"], d["order"]
    if type(groups) is not list or len(groups) > MAX_OPS or not all(map(_is_group, groups)):
        return False
    if type(transfers) is not list or len(transfers) > MAX_STEPS or \
            not all(map(_is_transfer, transfers)):
        return False
    return type(order) is list and len(order) <= MAX_STEPS and all(map(_is_step, order))


def check_schedule_json(d: Any) -> None:
    """Check a decoded schedule against :data:`SCHEDULE_SCHEMA` and the op budget.

    Raises:
        ScheduleError: The first problem, as one line naming where it is.
    """
    global _validator
    if not conforms(d):
        import jsonschema

        from compiler._json_schema import first_problem

        if _validator is None:
            _validator = jsonschema.Draft202012Validator(SCHEDULE_SCHEMA)
        problem = first_problem(_validator, d, "schedule")
        raise ScheduleError(problem or "schedule: malformed layout (see SCHEDULE_SCHEMA)")
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
