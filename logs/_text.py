"""A schedule's JSON object carried as the text a log line holds (:class:`ScheduleText`).

A record's schedule is a JSON object (:attr:`logs.Record.schedule`, any ``Mapping``).
Writing a record's line dumps it (``json.dumps``, the line's settings): on a large
model's schedule (BERT-base s128 b8, ~26 KB of text) most of the line's cost. A
``ScheduleText`` is that object already as the line's text: the tuner's measuring
workers make it where the schedule was bred (``autotune.running._texts``), the driver
sets its ``source`` by splicing the text (:meth:`ScheduleText.with_source`) and the
writer copies it into the line (:meth:`logs.Record.to_line_bytes`), byte for byte the
line ``json.dumps`` of the object would write. To every reader it is the object: a
read-only ``Mapping`` whose keys with scalar values (``v``, ``batch``, ``source``...)
are kept beside the text, and whose other values are parsed from it when first read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

__all__ = ["ScheduleText"]

LINE_JSON: dict[str, Any] = {"separators": (",", ":"), "ensure_ascii": False, "allow_nan": False}
"""``json.dumps``' settings of a log line (:meth:`logs.Record.to_line_bytes`)."""
dumps = json.JSONEncoder(**LINE_JSON).encode
"""``json.dumps(obj, **LINE_JSON)``."""

_SCALARS = (str, int, float, bool, type(None))


class ScheduleText(Mapping[str, Any]):
    """A JSON object and its text as a log line writes it (see the module doc).

    ``text`` must be ``json.dumps(obj, **LINE_JSON)`` of the object it stands for
    (:meth:`of`, :meth:`join` make it so); ``head``: the object's keys with scalar values
    (the rest is parsed from ``text`` when first read); ``at``: where the ``source``
    key's value lies in ``text`` (None: the object has no ``source`` key).
    """

    __slots__ = ("_at", "_head", "_obj", "text")

    def __init__(self, text: str, head: Mapping[str, Any],
                 at: tuple[int, int] | None = None) -> None:
        self.text = text
        self._head = dict(head)
        self._at = at
        self._obj: dict[str, Any] | None = None

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> ScheduleText:
        """``obj`` (a JSON object with string keys) as its text."""
        return cls.join([(k, dumps(v)) for k, v in obj.items()],
                        {k: v for k, v in obj.items() if type(v) in _SCALARS})

    @classmethod
    def join(cls, pieces: Sequence[tuple[str, str]], head: Mapping[str, Any]) -> ScheduleText:
        """The object of ``pieces`` (its keys in order, each with its value's text as
        ``json.dumps`` writes it) and ``head`` (the values of its scalar keys)."""
        parts: list[str] = []
        at = None
        n = 1  # the text's length so far: "{"
        for k, v in pieces:
            if type(k) is not str:  # json.dumps would quote it: the line would not be JSON
                raise TypeError(f"a schedule's keys are strings, not {type(k).__name__} ({k!r})")
            key = dumps(k) + ":"
            if k == "source":
                start = n + (1 if parts else 0) + len(key)
                at = (start, start + len(v))
            parts.append(key + v)
            n += len(parts[-1]) + (1 if len(parts) > 1 else 0)
        return cls("{" + ",".join(parts) + "}", head, at)

    def with_source(self, source: str) -> ScheduleText:
        """The same object with its ``source`` set to ``source`` (``{**obj, "source": source}``:
        in its place, or last if it had none)."""
        value = dumps(source)
        head = {**self._head, "source": source}
        if self._at is None:
            start = len(self.text) - 1 + (len(',"source":') if len(self.text) > 2 else
                                          len('"source":'))
            sep = "," if len(self.text) > 2 else ""
            return ScheduleText(f'{self.text[:-1]}{sep}"source":{value}}}', head,
                                (start, start + len(value)))
        i, j = self._at
        return ScheduleText(self.text[:i] + value + self.text[j:], head, (i, i + len(value)))

    def parsed(self) -> dict[str, Any]:
        """The object, parsed from the text once (shared: do not change it; ``dict(self)``
        is a copy)."""
        if self._obj is None:
            self._obj = json.loads(self.text)
        return self._obj

    def to_json(self) -> ScheduleText:
        """The JSON object: itself (what takes a schedule or its JSON keeps it as it is)."""
        return self

    def __getitem__(self, key: str) -> Any:
        head = self._head
        if key in head:
            return head[key]
        return self.parsed()[key]

    def __contains__(self, key: object) -> bool:
        return key in self._head or key in self.parsed()

    def __iter__(self) -> Iterator[str]:
        return iter(self.parsed())

    def __len__(self) -> int:
        return len(self.parsed())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ScheduleText) and self.text == other.text:
            return True  # the same text is the same object (else compared as mappings)
        return super().__eq__(other)

    __hash__ = None  # type: ignore[assignment]  # (a mapping, as a dict)

    def __reduce__(self) -> tuple[Any, ...]:
        return (ScheduleText, (self.text, self._head, self._at))

    def __repr__(self) -> str:
        short = self.text if len(self.text) <= 80 else self.text[:77] + "..."
        return f"ScheduleText({short})"
