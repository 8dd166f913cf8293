"""The compiled scope walk's answers: what ``scope_walk`` (:mod:`search_space._ccore`)
hands the C walk as each group's and each producer's wanted scope.

The walk asks the reader, in walk order (``_StepRows.asks``: group i, or -1 - producer p),
each group's scope policy (its chunks' scope codes: :func:`chunk_codes`, kept by
(policy, split, wave)) and each producer's transfer scope (:data:`XSCOPE_CODES`).
:func:`wants_py` is that loop in Python, the reference; ``wants`` in
``search_space/_cshape.c`` runs it in C, reading a recorder's answers directly (and a
capacity repair's overrides: :func:`reader_parts`) or calling any other reader once per
answer. ``tests/search_space/test_cglue.py`` compares the two.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from search_space._dims import SCOPE_POLICIES, TRANSFER_SCOPES

CODE = {"L1": 0, "LLB": 1, "DDR": 2}
AUTO = 3

# transfer-scope choice index -> the scope code its transfers ask for (3: auto)
XSCOPE_CODES = tuple(AUTO if xs == "auto" else CODE[xs] for xs in TRANSFER_SCOPES)

# (scope policy index, split, wave) -> the scope code each chunk asks for
CHUNK_CODES: dict[tuple[int, int, int], tuple[int, ...]] = {}


def wants(glue: Any, asks: list[int], gd: list[int], pd: list[int], groups: list[Any],
          get: Callable[[int], int], chunk_scopes: Callable[..., Any]) -> tuple[list[Any], list[Any]]:
    """Per group the scope code each chunk asks for, per producer its transfer scope's code:
    ``wants`` of the compiled module ``glue`` (``_cshape``), or :func:`wants_py` when None."""
    if glue is None:
        return wants_py(asks, gd, pd, groups, get, chunk_scopes)
    return glue.wants(asks, gd, pd, groups, reader_parts(get), CHUNK_CODES,  # type: ignore[no-any-return]
                      lambda p, s, w: chunk_codes(chunk_scopes, p, s, w), len(SCOPE_POLICIES),
                      XSCOPE_CODES)


def wants_py(asks: list[int], gd: list[int], pd: list[int], groups: list[Any],
             get: Callable[[int], int], chunk_scopes: Callable[..., Any]
             ) -> tuple[list[Any], list[Any]]:
    """The answers in walk order (group i, or -1 - producer p; ``gd``/``pd`` each group's
    scope and transfer-scope parameter), in Python: the reference of ``wants`` in C."""
    gwants: list[tuple[int, ...] | None] = [None] * len(groups)
    pwants: list[int | None] = [None] * len(groups)
    for a in asks:
        if a >= 0:
            gr = groups[a]
            key = (get(gd[a]), gr.split, gr.wave)
            codes = CHUNK_CODES.get(key)
            if codes is None:
                codes = chunk_codes(chunk_scopes, *key)
            gwants[a] = codes
        else:
            pwants[-1 - a] = XSCOPE_CODES[get(pd[-1 - a])]
    return gwants, pwants


def chunk_codes(chunk_scopes: Callable[..., Any], policy: int, split: int, wave: int
                ) -> tuple[int, ...]:
    """The scope code each chunk of a group asks for under scope policy ``policy`` (an index
    of ``SCOPE_POLICIES``; ``chunk_scopes`` is :func:`search_space._build.chunk_scopes`),
    kept in :data:`CHUNK_CODES`."""
    codes = CHUNK_CODES[(policy, split, wave)] = tuple(
        CODE[w] for w in chunk_scopes(SCOPE_POLICIES[policy], split, wave))
    return codes


def c_values(values: Any) -> list[int] | bytes | None:
    """A recorder's ``values`` as the compiled readers take them (``_cshape.groups``/``wants``,
    ``_cdag.blocks``): its list of ints, or for the compiled decoder's ``memoryview`` of an
    int16 vector (:meth:`search_space._space.Space._decode_marked`: no list of ~2,000 ints
    made per decode, issue 20) the bytes under it, which C reads in place; None for anything
    else (the caller's Python path)."""
    if type(values) is list:
        return values
    if type(values) is memoryview and values.format == "h" and values.ndim == 1:
        raw = values.obj
        if type(raw) is bytes and len(raw) == values.nbytes:
            return raw
    return None


def reader_parts(get: Callable[[int], int]) -> Any:
    """What ``wants`` in ``_cshape.c`` reads the answers with: a recorder over a whole
    assignment (``search_space._space._Recorder``: its values (:func:`c_values`), rep and active), possibly
    under a capacity repair's overrides (``search_space._build._Overridden``: its rep and
    overrides), as a tuple (values, rep, active, overrides' rep or None, overrides or None);
    any other reader as itself (called once per answer)."""
    over = getattr(get, "overrides", None)
    inner = getattr(get, "inner", None) if over is not None else get
    values, rep, active = (getattr(inner, a, None) for a in ("values", "rep", "active"))
    values = c_values(values)
    if values is None or type(rep) is not list or type(active) is not bytearray:
        return get
    if over is None:
        return (values, rep, active, None, None)
    orep = getattr(get, "rep", None)
    if type(orep) is not list or type(over) is not dict:
        return get
    return (values, rep, active, orep, over)
