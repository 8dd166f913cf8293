"""JSON Schema checks of user files with short, one-line messages.

``jsonschema``'s own messages quote the whole offending value, which for a
hostile file can be megabytes on one line; :func:`describe` names the path and
the rule instead, with the value cut short. :func:`first_problem` stops at the
first error, so a file with a million bad items costs no more than one.
"""

from __future__ import annotations

import reprlib
from typing import Any

_SHORT = reprlib.Repr()
_SHORT.maxstring = 40
_SHORT.maxother = 40
_SHORT.maxlist = 4
_SHORT.maxdict = 4
_SHORT.maxlevel = 2
_TYPES = {"integer": "an integer", "string": "a string", "array": "a list",
          "object": "an object", "number": "a number", "null": "null", "boolean": "true or false"}


def short(value: Any) -> str:
    """``repr`` of a value, cut to a few dozen characters."""
    try:
        return _SHORT.repr(value)
    except (RecursionError, ValueError):
        return f"<{type(value).__name__}>"


def _where(error: Any, root: str) -> str:
    path = root
    for part in error.absolute_path:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def _deepest(error: Any) -> Any:
    """For ``anyOf``/``oneOf``, the alternative that got furthest (as jsonschema's best_match)."""
    while error.context:
        error = max(error.context, key=lambda e: (len(e.absolute_path), -len(e.context or ())))
    return error


def describe(error: Any, root: str) -> str:
    """One short line for a ``jsonschema.ValidationError``: where, and what rule failed.

    A subschema with a ``description`` is described by it (``"DDR, LLB or L1"``)
    rather than by whichever of its alternatives failed deepest.
    """
    if error.context and isinstance(error.schema, dict) and "description" in error.schema:
        return (f"{_where(error, root)} must be {error.schema['description']}, "
                f"got {short(error.instance)}")
    e = _deepest(error)
    where = _where(e, root)
    kind, rule, value = e.validator, e.validator_value, e.instance
    if kind == "type":
        names = [rule] if isinstance(rule, str) else list(rule)
        want = " or ".join(_TYPES.get(n, n) for n in names)
        return f"{where} must be {want}, got {short(value)}"
    if kind == "required":
        missing = [k for k in rule if isinstance(value, dict) and k not in value]
        return f"{where}: missing key {missing[0]!r}" if missing else f"{where}: missing a key"
    if kind in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        op = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">",
              "exclusiveMaximum": "<"}[kind]
        return f"{where} must be {op} {rule}, got {short(value)}"
    if kind in ("maxItems", "minItems"):
        n = len(value) if isinstance(value, list) else "?"
        bound = "at most" if kind == "maxItems" else "at least"
        return f"{where} has {n} items; {bound} {rule} allowed"
    if kind in ("maxLength", "minLength"):
        bound = "at most" if kind == "maxLength" else "at least"
        return f"{where} must have {bound} {rule} characters"
    if kind in ("enum", "const"):
        allowed = ", ".join(str(v) for v in (rule if kind == "enum" else [rule]))
        return f"{where} must be one of {allowed}, got {short(value)}"
    if kind == "maxProperties":
        return f"{where} has more than {rule} keys"
    if kind == "pattern":
        return f"{where} is not in the expected form, got {short(value)}"
    return f"{where} is not valid ({kind} {short(rule)}), got {short(value)}"


def first_problem(validator: Any, instance: Any, root: str) -> str | None:
    """The first schema violation of ``instance`` as one line, or None when it conforms."""
    try:
        error = next(iter(validator.iter_errors(instance)), None)
    except RecursionError:
        return f"{root} is nested too deeply"
    return None if error is None else describe(error, root)
