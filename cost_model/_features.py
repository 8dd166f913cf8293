"""Schedule features: what a performance engineer looks at, computed without simulating.

:func:`features` turns candidate schedules of one graph into one row each. Every
column is named and documented in :data:`FEATURES` (``feature_names()`` lists
them in order). Columns are **normalised by the target** so a model trained on
one chip (or network) can rank on another:

* times are cycles at the target's rates (matrix MACs per cycle and granule,
  vector lanes, DDR / LLB / NoC / DMA bytes per cycle) divided by the
  *reference time* :func:`reference_cycles` of the graph on the target (the
  roofline: every MAC at peak on every core, vector work likewise, each weight
  and the model's inputs and outputs crossing DDR once), so 1.0 means "as long as
  the ideal whole inference";
* sizes are shares of the capacity they compete for (a core's L1, the LLB);
* counts are shares or logarithms.

What is counted (all from :mod:`compiler`; this package never imports ``sim``):
per-op work from :func:`compiler.opshape.op_shapes` (matrix work padded to the
array's granule, instruction counts, vector work at the transcendental rate,
weights), working sets and result sizes from :mod:`compiler.footprint` (the
pieces the capacity model adds up), and chunk geometry from
:mod:`compiler.layout` (which bytes stay in a core's L1, which cross the NoC and
over how many hops). The capacity columns are estimates at group boundaries,
not the capacity model's full walk over the order
(:func:`compiler.capacity.plan_memory`): that walk costs milliseconds per
candidate, more than everything else here together, and the search space's
pre-check already rejects candidates that overflow.

Speed: what depends on one group config (op set and its chunks' placements) or
one producer-consumer pair of groups is computed once and kept in tables beside
the graph (:func:`compiler.memo.memo_of`); a schedule is then a list of table
rows summed with numpy. Schedules the search space decoded carry codes of the
values they share (:mod:`compiler.codes`: group specs, transfer placements, order
steps): their table rows are gathered with numpy over all candidates at once
(producers by sorting, transfers' layouts and edges by a verified hash), with no
Python per group or edge once the tables are warm. Other schedules (built by hand,
loaded, copied) walk their objects, looking values up by identity first, by value
otherwise; both paths give the same rows. New groups, edges and layouts are then
computed together, vectorised over all their chunks (per-core costs from per-op
tables, an op set's being the sum over its ops, added in the same order) and
edges (movement once per pair of result layouts; equal layouts share one).
``bench/cost_model.py`` (section ``speed``) measures 10,000 ResNet-50 candidates.

Where the code is: the columns and the reference time in :mod:`cost_model._feature_set`;
the featuriser (:class:`_Featuriser`, here) is built in layers, one module each:
:mod:`cost_model._feature_tables` (its tables and their row types),
:mod:`cost_model._feature_parts` (op sets, core parts, placements),
:mod:`cost_model._feature_groups` (groups, layouts, edges),
:mod:`cost_model._feature_walk` (the object walk, rows into features) and
:mod:`cost_model._feature_gather` (the coded gather).

Example:
    >>> X = features(graph, candidates, target)   # (len(candidates), len(FEATURES))
    >>> dict(zip(feature_names(), X[0]))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from compiler.codes import ScheduleCodes, ValueTable, codes_of
from compiler.memo import memo_of
from cost_model._feature_gather import _CodedGather
from cost_model._feature_set import FEATURES, Feature, feature_names, reference_cycles
from cost_model._feature_tables import (
    _SCOPE_CODE,
    _Walked,
)
from search_space._ccore import _pure_forced

if TYPE_CHECKING:
    from compiler.graph import Graph
    from compiler.schedule import GraphSchedule
    from compiler.target import Target
    from search_space import Space

__all__ = ["FEATURES", "Feature", "feature_names", "features", "reference_cycles"]


def features(graph: Graph, schedules: Sequence[GraphSchedule], target: Target,
             space: Space | None = None) -> np.ndarray:
    """One row per schedule (float64): the :data:`FEATURES`, then the space's encoding.

    Args:
        graph: The model the schedules are for (at their batch).
        schedules: Structurally valid candidates (as the search space decodes them, or
            after ``schedule.validate``); they need not fit.
        target: The chip: rates and capacities normalise every column.
        space: When given, its encoding (``space.encode_many``: one column per
            parameter, the choice index) is appended (names: ``feature_names(space)``).
            Free for schedules the space decoded in this process; others are projected
            onto it first (slow). Models with these columns do not transfer to other
            networks (each space has its own parameters).
    """
    X = _featuriser(graph, target).run(schedules)
    if space is None:
        return X
    return np.hstack([X, space.encode_many(list(schedules)).astype(np.float64)])


def _featuriser(graph: Graph, target: Target) -> _Featuriser:
    """The graph's featuriser for ``target``; one per ``GRAPHTUNE_PURE_PYTHON`` state, as the
    variable is read at run time (a featuriser keeps the op-set facts it took from C)."""
    memo = memo_of(graph)
    key = ("cost_model.featuriser", target.hash, _pure_forced())
    f: _Featuriser | None = memo.get(key)
    if f is None or f.full():
        f = memo[key] = _Featuriser(graph, target)
    return f


class _Featuriser(_CodedGather):
    """Tables of per-group and per-edge quantities for one (graph, target).

    Lives in the graph's memo. Keys are the schedule's own values (op sets,
    scopes, core bindings), never object identities, so equal groups of different
    candidates share a row. Identities only short-cut the lookup of a value seen
    before: the search space shares its op tuples and ``Placement`` values between
    the candidates it decodes, and each id maps to the value's index while the
    object is kept alive here.

    Schedules with codes (:mod:`compiler.codes`) are gathered by :meth:`_gather`,
    through one :class:`_CodeMaps` per producer's value table (codes -> rows here);
    the others are walked by :meth:`_walk`. Both register new group configs and
    edges and leave them to :meth:`flush_groups` and :meth:`flush_edges`.

    New groups are computed together, vectorised over their chunks
    (:meth:`flush_groups`); a group whose core parts differ in size (never decoded
    by the search space) takes the chunk-by-chunk path (:meth:`_group_slow`).
    ``vectorised=False`` forces that path for every group and the object walk for
    every schedule: the reference the tests compare with.
    """

    def __init__(self, graph: Graph, target: Target, vectorised: bool = True) -> None:
        super().__init__(graph, target, vectorised)
        # the model's inputs: the first layout, in DDR, on core 0's part
        self.layout(("model input",), [_SCOPE_CODE["DDR"]] * self.batch,
                    [self.tuple_id((0,))] * self.batch)

    def run(self, schedules: Sequence[GraphSchedule]) -> np.ndarray:
        n = len(schedules)
        out = np.zeros((n, len(FEATURES)))
        if n == 0:
            return out
        # schedules with codes (compiler.codes: decoded by a search space) are gathered with
        # numpy, per value table; the others (and all with vectorised=False) walk their objects
        plain: list[int] = []
        coded: dict[int, tuple[ValueTable, list[int], list[ScheduleCodes]]] = {}
        for k, s in enumerate(schedules):
            c = codes_of(s) if self.vectorised else None
            if c is None:
                plain.append(k)
                continue
            hit = coded.get(id(c.table))
            if hit is None:
                hit = coded[id(c.table)] = (c.table, [], [])
            hit[1].append(k)
            hit[2].append(c)
        parts: list[tuple[list[int], _Walked]] = []
        if plain:
            parts.append((plain, self._walk([schedules[k] for k in plain])))
        for table, ks, cs in coded.values():
            parts.append((ks, self._gather(self._maps(table), cs)))
        self.flush_groups()
        self.flush_edges()
        for ks, walked in parts:
            if len(ks) == n:
                out[:] = self._aggregate(*walked)
            else:
                out[ks] = self._aggregate(*walked)
        return out

