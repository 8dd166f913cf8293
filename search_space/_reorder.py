"""A ``reorder`` child whose chunk order is its parent's is its parent: known before the walk.

A ``reorder`` move (:meth:`search_space.Space.mutate`, and the polish's neighbours of
:func:`search_space._neighbours.neighbour_vectors`) changes one of the two order
parameters, ``order`` (depth or breadth) or ``lookahead``. Decoding reads them first and
uses them for one thing only: the execution order of the chunk DAG (``Decoding.chunk_order``,
``_cdag.derive``'s order); the groups, their shapes and cores, the transfers and the DAG
are read and derived without them, and everything after the order (the capacity walk and its
repairs, the schedule) reads the order's nodes, the DAG and the scope parameters, never the
two parameters. So a child that differs from its parent's canonical vector in nothing but
these, and whose chunk order equals the parent's order step by step, decodes to the parent
exactly; a child whose order differs decodes to another schedule (the order is part of its
identity). On a BERT-base tune 239 of 350 reorder moves gave their parent back (~6 % of the
decodes, each paying the walk, the schedule, its codes and text: issue 20, h131).

:func:`decodes_to_parent` decides that from passes 1 and 2 of the child's decode
(:func:`search_space._build.decode_groups`: blocks, groups, the chunk DAG and its order,
compiled or Python as the full decode would run them) and the parent's order codes, so the
caller skips the walk, the schedule and its codes. The verdict equals the full decode's
(``tests/search_space/test_reorder_noop.py`` compares both on random moves of several zoo
models, compiled and pure Python).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from compiler.codes import codes_of
from search_space._build import decode_groups

if TYPE_CHECKING:
    from compiler.schedule import GraphSchedule

STATS = {"same": 0, "other": 0, "skipped": 0}  # verdicts (benches, tests)


def order_only(space: Any, parent_vec: np.ndarray, child: np.ndarray) -> bool:
    """Whether ``child`` differs from ``parent_vec`` (a canonical vector) in at most the
    ``order`` and ``lookahead`` parameters (and in at least one entry)."""
    fo = int(space.rep[space.d_order])
    fl = int(space.rep[space.d_lookahead])
    diff = np.flatnonzero(child != parent_vec)
    return 0 < len(diff) <= 2 and all(f in (fo, fl) for f in diff.tolist())


def decodes_to_parent(space: Any, parent: GraphSchedule, child: np.ndarray) -> bool:
    """True when ``child`` (a vector of ``space``) is known to decode to ``parent``, a
    schedule ``space`` decoded: the child differs from the parent's canonical vector only in
    the order parameters and its chunk order is the parent's. False: not known (decode it):
    another order, another change, not this space's decode or its codes not at hand."""
    known = space._known(parent)
    if known is None or not order_only(space, known[0], child):
        STATS["skipped"] += 1
        return False
    codes = codes_of(parent)
    if codes is None:
        STATS["skipped"] += 1
        return False
    # passes 1 and 2 as the full decode runs them (decode_fitted and decode_with start so)
    dec = decode_groups(space, space._reader(child))
    nodes = dec.chunk_order()
    order = codes.order
    if len(nodes) != len(order):
        STATS["other"] += 1
        return False
    # the parent's order steps by their nodes (the value table keys a step by its node)
    got = codes.table.step_codes(nodes)  # type: ignore[arg-type]
    same = None not in got and np.array_equal(np.asarray(got, dtype=np.int64), order)
    STATS["same" if same else "other"] += 1
    return bool(same)
