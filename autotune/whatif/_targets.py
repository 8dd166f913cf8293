"""Target variants of a hardware sweep: ``--set key=v1,v2`` values, their names and their checks.

A variant is the base target with some keys changed, named after them
(``STCP920+l1.data_bytes=512K``): the name is part of the target key, so each
variant's records are told apart in one log, and ``compile --log --target``
finds them through the variant's hardware file (:func:`target_toml`).

Values are checked exactly as a hardware file's are (:meth:`Target.from_dict`):
``--set l1.data_bytes=0`` fails with the same bound as ``--target`` would.

Example:
    >>> sets = [parse_set("l1.data_bytes=512K,1M"), parse_set("ddr.bytes_per_cycle=13,27")]
    >>> [v.name for v in make_variants(Target.default(), sets)][:1]
    ['STCP920+l1.data_bytes=512K,ddr.bytes_per_cycle=13']
"""

from __future__ import annotations

import hashlib
import itertools
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from compiler.errors import GraphtuneError, TargetError
from compiler.target import _SECTIONS, Target

__all__ = ["Variant", "make_variants", "parse_set", "parse_value", "settable_keys", "target_toml",
           "write_variant_targets"]

_SUFFIX = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
_NUMBER = re.compile(r"^([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)([KMG](?:i?B)?)?$")
MAX_VARIANTS = 4096
_TOP = {"clock_hz": "float", "compute_dtype": "str"}


def settable_keys() -> dict[str, str]:
    """Every key a sweep may set (``section.field`` or a top-level key) -> its type name."""
    out = dict(_TOP)
    for section, dc in _SECTIONS.items():
        for f in fields(dc):
            out[f"{section}.{f.name}"] = str(f.type)
    return out


def parse_value(key: str, text: str) -> Any:
    """One value of ``key`` from the command line: ``512K``, ``1M``, ``2G`` (binary), ``13``, ``true``.

    Raises:
        GraphtuneError: not a value of that key's type (bounds are the target's checks).
    """
    kind = settable_keys()[key]
    t = text.strip()
    if kind == "str":
        if not t:
            raise GraphtuneError(f"--set {key}: an empty value")
        return t
    if kind == "bool":
        if t.lower() in ("true", "1", "yes"):
            return True
        if t.lower() in ("false", "0", "no"):
            return False
        raise GraphtuneError(f"--set {key}={t}: must be true or false")
    m = _NUMBER.match(t)
    if not m:
        raise GraphtuneError(f"--set {key}={t[:40]}: not a number (size suffixes K, M, G "
                             "are powers of 1024, e.g. 512K)")
    number = float(m.group(1)) * (_SUFFIX[m.group(2)[0]] if m.group(2) else 1)
    if not math.isfinite(number):
        raise GraphtuneError(f"--set {key}={t[:40]}: not a finite number")
    if kind == "int":
        if not number.is_integer():
            raise GraphtuneError(f"--set {key}={t}: must be an integer")
        return int(number)
    return number


def parse_set(spec: str) -> tuple[str, list[tuple[str, Any]]]:
    """``"l1.data_bytes=256K,512K"`` -> ``("l1.data_bytes", [("256K", 262144), ("512K", 524288)])``.

    Raises:
        GraphtuneError: no ``=``, an unknown key, no value, a repeated value or a bad value.
    """
    key, sep, values = spec.partition("=")
    key = key.strip()
    if not sep:
        raise GraphtuneError(f"--set {spec[:60]!r}: expected KEY=V1,V2,... (e.g. l1.data_bytes=512K,1M)")
    keys = settable_keys()
    if key not in keys:
        raise GraphtuneError(f"--set: unknown target key {key[:64]!r}; valid keys: "
                             + ", ".join(sorted(keys)))
    texts = [v.strip() for v in values.split(",")]
    if not texts or any(not v for v in texts):
        raise GraphtuneError(f"--set {key}: give comma-separated values, e.g. {key}=1,2")
    out = [(v, parse_value(key, v)) for v in texts]
    seen: set[Any] = set()
    for text, value in out:
        if value in seen:
            raise GraphtuneError(f"--set {key}: the value {text} is given twice")
        seen.add(value)
    return key, out


@dataclass(frozen=True)
class Variant:
    """One target of a sweep.

    Attributes:
        name: The target's name (``STCP920+l1.data_bytes=512K``), its records' chip.
        target: The validated target.
        values: Swept key -> value (numbers in the target's units).
        texts: Swept key -> the value as the user wrote it (``512K``).
        base: Swept key -> the base target's value of it (empty: not known).
    """

    name: str
    target: Target
    values: dict[str, Any]
    texts: dict[str, str]
    base: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """The target key of its records."""
        return self.target.key


def _with(base: Target, values: dict[str, Any], name: str) -> Target:
    data = base.to_dict()
    data["name"] = name
    for key, value in values.items():
        section, dot, field = key.partition(".")
        if dot:
            data[section] = {**data[section], field: value}
        else:
            data[key] = value
    what = ", ".join(f"{k}={v}" for k, v in values.items())
    return Target.from_dict(data, source=f"--set {what}")


def _name(base: Target, texts: dict[str, str]) -> str:
    name = base.name + "+" + ",".join(f"{k}={v}" for k, v in texts.items())
    if len(name) <= 64:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{base.name[:40]}+{len(texts)}keys-{digest}"


def make_variants(base: Target, sets: Sequence[tuple[str, list[tuple[str, Any]]]],
                  zip_: bool = False) -> list[Variant]:
    """The cross product (or, with ``zip_``, the element-wise zip) of the swept values.

    Raises:
        GraphtuneError: no ``--set``, a key set twice, zipped lists of unequal length,
            more than :data:`MAX_VARIANTS` variants, or a value the target's checks
            refuse (``TargetError``, the message ``--target`` would give).
    """
    if not sets:
        raise GraphtuneError("nothing to sweep: give at least one --set KEY=V1,V2,...")
    keys = [k for k, _ in sets]
    dup = sorted({k for k in keys if keys.count(k) > 1})
    if dup:
        raise GraphtuneError(f"--set {dup[0]} is given twice: put all its values in one --set")
    if zip_:
        lengths = {len(v) for _, v in sets}
        if len(lengths) > 1:
            raise GraphtuneError("--zip needs the same number of values in every --set, got "
                                 + ", ".join(f"{k}: {len(v)}" for k, v in sets))
        combos = list(zip(*(v for _, v in sets)))
    else:
        n = math.prod(len(v) for _, v in sets)
        if n > MAX_VARIANTS:
            raise GraphtuneError(f"{n} variants: at most {MAX_VARIANTS} (use --zip or fewer values)")
        combos = list(itertools.product(*(v for _, v in sets)))
    out: list[Variant] = []
    names: set[str] = set()
    for combo in combos:
        values = {k: v for k, (_, v) in zip(keys, combo)}
        texts = {k: t for k, (t, _) in zip(keys, combo)}
        name = _name(base, texts)
        try:
            target = _with(base, values, name)
        except TargetError as exc:
            raise TargetError(str(exc)) from None
        if name in names:
            raise GraphtuneError(f"two variants are both named {name}: give distinct values")
        names.add(name)
        out.append(Variant(name, target, values, texts, {k: _base_value(base, k) for k in keys}))
    return out


def _base_value(base: Target, key: str) -> Any:
    section, dot, name = key.partition(".")
    data = base.to_dict()
    return data[section][name] if dot else data[key]


def target_toml(target: Target) -> str:
    """The target as a hardware file that :meth:`Target.from_toml` reads back equal (same key)."""
    d = target.to_dict()
    lines = [f"name = {_toml(d['name'])}", f"clock_hz = {_toml(d['clock_hz'])}",
             f"compute_dtype = {_toml(d['compute_dtype'])}"]
    for section in _SECTIONS:
        lines.append("")
        lines.append(f"[{section}]")
        for key, value in d[section].items():
            lines.append(f"{key} = {_toml(value)}")
    return "\n".join(lines) + "\n"


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def write_variant_targets(out: Path, variants: Sequence[Variant]) -> list[str]:
    """Each variant's hardware file, ``out/targets/<name>.toml`` (for ``compile --target``)."""
    from compiler.files import write_atomic

    d = out / "targets"
    d.mkdir(parents=True, exist_ok=True)
    files = []
    for v in variants:
        p = d / f"{v.name}.toml"
        write_atomic(p, target_toml(v.target).encode())
        files.append(os.fspath(p))
    return files
