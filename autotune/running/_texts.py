"""A bred pick's schedule JSON as its log line's text, made in the worker that bred it.

A measuring worker returns a breeding round's picks to the driver with their schedules'
JSON (``autotune.sampling._breed.Pick.json``), which the driver sends on, and writes
into the log with the pick's ``source`` set. As a dict that costs the driver an unpickling
(~17 KB pickled on BERT-base s128 b8) and a ``json.dumps`` per record (~26 KB of text),
the most of its main thread's CPU a measurement (issue 20). :func:`picks_as_text` turns
the picks' JSON into :class:`logs.ScheduleText` before they leave the worker: the text
``json.dumps`` would write, made from text kept per group spec and order step (the
decoder interns them: a round's picks share many of them, so a schedule's text is partly
joined, not written; a new one's, and the transfers', written from the schedule's JSON the
breeder made, by ``logs._cjson.text`` (a compact JSON writer in C; the json module's C
encoder, kept once, for what it does not take)); the driver unpickles a string and splices the record's
``source`` into it (``ScheduleText.with_source``); the log's bytes are the same.

The memo is per worker process and bounded by bytes (issue 20, h134, measured in 2-worker
Ray tunes): it keeps group specs and order steps only. A transfer is made anew by every
decode (:mod:`search_space._cderive`), so it was never found again (0 hits in ~54,000 a
worker in a 10,000-trial BERT-base tune, against 61-63 % of group specs and 99 % of steps)
and the memo only pinned it (~180 bytes a transfer the decoder had dropped): a schedule's
transfers are written whole, one encoder call. The memo starts again past
:data:`_MEMO_BYTES`, each entry charged its text's length and :data:`_ENTRY_BYTES` (the
str's header, the tuple, the dict's slot and the int key): 8.4 MB a worker at most (that
tune: 8.25 MB at its fullest, 58-59 % of group specs found); the old bound, 2**17 entries
of any kind, held ~37.5 MB a worker at the end of that tune (90,000 entries, 23,500 of
them transfers only it kept) and ~54 MB when full (~414 bytes an entry).

A worker given a batch with such texts measures them as the dicts they stand for
(:func:`as_dicts`).
"""

from __future__ import annotations

import json
import operator
from collections.abc import Sequence
from dataclasses import replace
from itertools import repeat
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from operator import itemgetter
from typing import Any

from logs import ScheduleText
from logs._text import dumps

__all__ = ["as_dicts", "picks_as_text", "schedule_text"]

_LISTS = ("groups", "transfers", "order")
_KEPT = ("groups", "order")  # lists whose items' texts are kept (a transfer is never met again)
_SCALARS = (str, int, float, bool, type(None))
# the memo's bound: its entries' text lengths plus _ENTRY_BYTES each (each entry holds its
# object: an id is not reused while kept)
_MEMO_BYTES = 8 << 20
_ENTRY_BYTES = 200  # a str's header 49-73, the tuple 56, a dict slot 30-80, the int key 32
_memo: dict[int, tuple[Any, str]] = {}
_memo_bytes = 0  # what the memo holds, charged as above
_MISS = (None, "")
# json.dumps(obj, **LINE_JSON)'s C encoder, made once (json.dumps makes one a call: ~1.3 us
# of an item's ~3); its chunks joined are the same text
_encode = c_make_encoder(None, json.JSONEncoder().default, encode_basestring, None, ":", ",",
                         False, False, False) if c_make_encoder is not None else None


try:  # the compact text of the values a schedule's JSON is made of, written in C
    from logs._cjson import text as _ctext
except ImportError:  # not built: the json encoder, the same text
    _ctext = None


def _text(value: Any) -> str:
    """``dumps(value)``: from ``logs._cjson`` when it takes the value (None: it does not),
    else from the json module's C encoder."""
    if _ctext is not None:
        text = _ctext(value)
        if text is not None:
            return text
    return "".join(_encode(value, 0)) if _encode is not None else dumps(value)


def _list_text(items: Sequence[Any], values: list[Any]) -> str:
    """``dumps(values)``, ``values[i]`` being ``items[i].to_json()``: each item's text from
    the memo (by identity), a new one's written from its value and kept."""
    global _memo_bytes
    got = list(map(_memo.get, map(id, items), repeat(_MISS)))
    if not all(map(operator.is_, map(itemgetter(0), got), items)):
        new = {}
        for i, (item, value) in enumerate(zip(items, values)):
            if got[i][0] is not item:
                got[i] = new[id(item)] = (item, _text(value))
        size = sum(len(t) for _, t in new.values()) + _ENTRY_BYTES * len(new)
        if _memo_bytes + size > _MEMO_BYTES:
            _memo.clear()
            _memo_bytes = 0
        if size <= _MEMO_BYTES:
            _memo.update(new)
            _memo_bytes += size
    return "[" + ",".join(map(itemgetter(1), got)) + "]"


def schedule_text(schedule: Any, obj: dict[str, Any]) -> ScheduleText:
    """``obj`` (``schedule.to_json()``: its lists' items are the schedule's items' JSON) as a
    :class:`logs.ScheduleText`, its group specs' and steps' text kept per item object, its
    transfers' written (see the module doc)."""
    pieces = []
    for k, v in obj.items():
        items = getattr(schedule, k) if k in _KEPT and type(v) is list else None
        if items is not None and len(items) == len(v):
            pieces.append((k, _list_text(items, v)))
        else:
            pieces.append((k, _text(v) if k in _LISTS and type(v) is list else dumps(v)))
    return ScheduleText.join(pieces, {k: v for k, v in obj.items() if type(v) in _SCALARS})


def picks_as_text(bred: Any) -> Any:
    """A breeding round (``autotune.sampling._breed.Bred``) whose picks carry their JSON
    as :class:`logs.ScheduleText` (a pick without JSON, or with another kind of value
    in it, as it was)."""
    picks = []
    for p in bred.picks:
        obj = p.json
        if type(obj) is dict and all(type(obj.get(k)) is list for k in _LISTS):
            p = replace(p, json=schedule_text(p.schedule, obj))
        picks.append(p)
    return replace(bred, picks=tuple(picks))


def as_dicts(schedules: Sequence[Any]) -> list[Any]:
    """A batch's schedules with each :class:`logs.ScheduleText` as its object (parsed: the
    worker's copy, as an unpickled dict was); the rest as they are."""
    return [s.parsed() if type(s) is ScheduleText else s for s in schedules]
