"""Hypothesis strategies for hostile files: JSON-ish values, mutations of good documents, bytes."""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Iterator
from typing import Any

from hypothesis import strategies as st

EDGE_INTS = st.sampled_from([-(10**12), -1, 0, 1, 2, 3, 4, 7, 8, 15, 16, 17, 255, 256, 2**31 - 1,
                             2**31, 2**53 + 1, 10**12, 10**100])
WORDS = st.sampled_from(["DDR", "LLB", "L1", "l1", "NPUMemScope.LLB", "g", "t", "split", "concat",
                         "group_0", "conv2d_0", "", " ", "\x00", "é", "../x", "a" * 300])
SCALARS = st.one_of(st.none(), st.booleans(), EDGE_INTS, st.integers(),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12), WORDS)
JSONISH = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                 max_size=4),
    max_leaves=10,
)


def _slots(doc: Any) -> Iterator[tuple[Any, Any]]:
    """Every (container, key) of a JSON document, containers first."""
    stack = [doc]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for k, v in node.items():
                yield node, k
                stack.append(v)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                yield node, i
                stack.append(v)


@st.composite
def mutated_json(draw: st.DrawFn, doc: Any, max_edits: int = 3) -> Any:
    """``doc`` with 1..max_edits edits: a value replaced, a key dropped, a list grown or wrapped."""
    out = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, max_edits))):
        slots = list(_slots(out))
        if not slots:
            break
        parent, key = draw(st.sampled_from(slots))
        op = draw(st.sampled_from(["replace", "replace", "replace", "delete", "grow", "wrap",
                                   "number"]))
        value = parent[key]
        if op == "replace":
            parent[key] = draw(JSONISH)
        elif op == "number":
            parent[key] = draw(EDGE_INTS)
        elif op == "delete":
            del parent[key]
        elif op == "grow" and isinstance(value, list) and value:
            parent[key] = value * draw(st.sampled_from([2, 3, 100, 5000]))
        elif op == "wrap":
            parent[key] = [value] if draw(st.booleans()) else {"x": value}
        else:
            parent[key] = draw(JSONISH)
    return out


@st.composite
def mutated_bytes(draw: st.DrawFn, data: bytes, max_edits: int = 4) -> bytes:
    """``data`` with byte edits: flips, a cut, an insertion, a zeroed range."""
    buf = bytearray(data)
    for _ in range(draw(st.integers(1, max_edits))):
        if not buf:
            buf += draw(st.binary(min_size=1, max_size=16))
            continue
        i = draw(st.integers(0, len(buf) - 1))
        op = draw(st.sampled_from(["flip", "flip", "cut", "insert", "zero", "delete"]))
        if op == "flip":
            buf[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "cut":
            del buf[i:]
        elif op == "insert":
            buf[i:i] = draw(st.binary(min_size=1, max_size=64))
        elif op == "zero":
            n = draw(st.integers(1, 256))
            buf[i : i + n] = bytes(len(buf[i : i + n]))
        else:
            del buf[i : i + draw(st.integers(1, 32))]
    return bytes(buf)


@st.composite
def scaled_numbers(draw: st.DrawFn, doc: Any, max_edits: int = 3) -> Any:
    """``doc`` with a few numbers scaled (x0, x1/8, x8, x10^9, ...): mostly still well formed."""
    out = copy.deepcopy(doc)
    slots = [(p, k) for p, k in _slots(out)
             if isinstance(p[k], int | float) and not isinstance(p[k], bool)]
    for _ in range(draw(st.integers(1, max_edits))):
        if not slots:
            break
        parent, key = draw(st.sampled_from(slots))
        factor = draw(st.sampled_from([0, 0.125, 0.5, 2, 8, 1e-9, 1e9, -1]))
        value = parent[key] * factor
        parent[key] = int(value) if isinstance(parent[key], int) else float(value)
    return out


def dumps(doc: Any) -> str:
    """JSON text; NaN and infinities as Python writes them (a hostile file may hold them)."""
    return json.dumps(doc)


def toml_value(v: Any) -> str | None:
    """TOML for a value; None for what TOML cannot hold (the key is dropped)."""
    if v is None:
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        items = [toml_value(x) for x in v]
        return "[" + ", ".join(x for x in items if x is not None) + "]"
    if isinstance(v, dict):
        items = [(json.dumps(str(k)), toml_value(x)) for k, x in v.items()]
        return "{" + ", ".join(f"{k} = {x}" for k, x in items if x is not None) + "}"
    return json.dumps(str(v))


def to_toml(doc: dict[str, Any]) -> str:
    """A nested dict (scalars at the top, one level of tables) as TOML text."""
    lines: list[str] = []
    tables: list[tuple[str, dict[str, Any]]] = []
    for k, v in doc.items():
        if isinstance(v, dict):
            tables.append((k, v))
            continue
        text = toml_value(v)
        if text is not None:
            lines.append(f"{json.dumps(str(k))} = {text}")
    for name, table in tables:
        lines.append(f"[{json.dumps(str(name))}]")
        for k, v in table.items():
            text = toml_value(v)
            if text is not None:
                lines.append(f"{json.dumps(str(k))} = {text}")
    return "\n".join(lines) + "\n"
