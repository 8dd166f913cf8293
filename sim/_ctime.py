"""The compiled timed step (``sim/_csim.c``), the Python step as reference and fallback.

A simulation's timing-free work is kept per step plan (:mod:`sim._plans`); what is left per
measurement is booking those plans on the timeline: each step's ready times, the L1 gate,
the loads' and streams' reservations, the cores' times and engine cycles. For a group step
that gathers no tables and runs no host op (nearly all of them), that booking runs in C on
a flat array of doubles packed once per plan (:func:`pack_group`, kept in the plan), with
the same floating-point operations in the same order as ``_Sim.group_step``, so results
are the same bit for bit (``tests/sim/test_csim.py`` compares every ``SimResult`` field
both ways). The simulation's state is one array of doubles (:func:`new_state`) that the
Python steps (tables, host ops) read and write through memoryview slices.

A new plan's movement plans and packing run in C too (``sim/_cpack.c``: :func:`load_pack`,
``sim._moves.move_plan``'s ``cpack``, :func:`pack_group`'s), the Python functions the
reference (``tests/sim/test_cpack.py`` compares them bit for bit).

``GRAPHTUNE_PURE_SIM=1`` forces the Python step and the Python plan making (read when a
simulation starts; separate from ``GRAPHTUNE_PURE_PYTHON``, which forces the Python
decoder). A simulation that records its timeline (``timeline=True``) runs the Python step.
When the extension is missing (no C compiler at install time) or fails to import, the
simulator warns once and runs in Python.
"""

from __future__ import annotations

import importlib
import os
import struct
import sys
from array import array
from collections.abc import MutableSequence
from itertools import chain, pairwise
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from sim._flows import Flows, GroupStatic
    from sim._model import ComputeCost

__all__ = ["MAX_CORES", "available", "built", "load", "load_pack", "new_state", "pack_group",
           "pack_transfer", "pure_forced"]

_state: dict[str, Any] = {"warned": False, "loaded": False, "mod": None}
_ENV = "GRAPHTUNE_PURE_SIM"
NEEDS = ("group_step", "transfer_step")  # what the current build of sim._csim has
_MAX_SCOPES = 8  # sim/_csim.c's MAX_SCOPES, MAX_LOADS, MAX_CORES
_MAX_LOADS = 64
MAX_CORES = 256


def pure_forced() -> bool:
    """Whether ``GRAPHTUNE_PURE_SIM`` forces the Python step (set and neither "" nor "0")."""
    return os.environ.get(_ENV, "") not in ("", "0")


def load() -> Any:
    """The compiled step module ``sim._csim``, or None: the Python step forced
    (``GRAPHTUNE_PURE_SIM``) or not built (one import attempt per process; a failure warns
    once)."""
    if pure_forced():
        return None
    return built()


def built() -> Any:
    """The compiled step module whatever ``GRAPHTUNE_PURE_SIM`` says (plans are packed for
    it whenever it is built, so a plan made under the switch serves both ways), or None."""
    if not _state["loaded"]:
        _state["loaded"] = True
        try:
            mod = importlib.import_module("sim._csim")
            for need in NEEDS:
                if not hasattr(mod, need):  # a build older than this source
                    raise ImportError(f"sim._csim is an older build (no {need}); reinstall: "
                                      "pip install -e .")
            _state["mod"] = mod
        except ImportError as exc:
            _state["mod"] = None
            if not _state["warned"]:
                _state["warned"] = True
                sys.stderr.write(f"graphtune: warning: the compiled simulator step is not "
                                 f"available ({exc}); simulating in Python (slower; see "
                                 "README, Install)\n")
    return _state["mod"]


_pack_state: dict[str, Any] = {"loaded": False, "mod": None}
# what the current build of sim._cpack has
PACK_NEEDS = ("add_items", "add_plan", "inputs_flows", "move_plan", "op_cost", "pack_group",
              "work_scan")


def load_pack() -> Any:
    """The compiled plan maker ``sim._cpack`` (movement plans, packing), or None: the Python
    functions forced (``GRAPHTUNE_PURE_SIM``) or it is not built (then quietly: the Python
    functions make the same plans; :func:`built` warns for the simulator's C)."""
    if pure_forced():
        return None
    if not _pack_state["loaded"]:
        _pack_state["loaded"] = True
        try:
            mod = importlib.import_module("sim._cpack")
            _pack_state["mod"] = mod if all(hasattr(mod, n) for n in PACK_NEEDS) else None
        except ImportError:
            _pack_state["mod"] = None
    return _pack_state["mod"]


def available() -> bool:
    """Whether simulations use the compiled step (built, importable and not disabled)."""
    return load() is not None


def new_state(bw: tuple[float, ...], cores: int, l1_cap: float
              ) -> tuple[array, list[MutableSequence[float]]]:
    """A simulation's state for ``sim/_csim.c`` (its layout is in that file's doc) and
    memoryview slices of it for the Python steps: free_at, busy (per resource), core_start,
    core_free, core_usage, mme, vme (per core)."""
    r = len(bw)
    st = array("d", [float(r), float(cores), float(l1_cap), *bw])
    st.extend([0.0] * (3 * r + 5 * cores - r))
    mv = memoryview(st)
    ends = [0, r, 2 * r] + [2 * r + i * cores for i in range(1, 6)]
    at = 3 + r
    return st, [cast("MutableSequence[float]", mv[at + a:at + b]) for a, b in pairwise(ends)]


_flat = chain.from_iterable


def _doubles(a: list[float]) -> bytes:
    """``array("d", a).tobytes()``: the same bytes (native doubles, each item converted by
    ``PyFloat_AsDouble``) for a quarter of the instructions (array's item setter parses each
    item as an argument: ~25 k instructions for a BERT-base plan of ~250 items)."""
    return struct.pack(f"{len(a)}d", *a)


def _flows(out: list[float], fl: Flows, latency: float) -> None:
    inc, fls = fl.incoming, fl.flows
    out += (latency, fl.noc, len(inc))
    out += _flat(inc.items())
    out.append(len(fls))
    out += _flat(fls.items())


def _streams(sim: Any, info: GroupStatic, streamed: tuple[Flows, ...], ex: Flows | None,
             out: Flows | None, cores: tuple[int, ...]) -> tuple[list[Flows], Flows | None]:
    """A group step's streams in the packed order (streamed inputs, the exchange, the
    weights past the first tile, the output) and the weights' flows (None when the first
    tile holds them all), for both packers."""
    streams = list(streamed)
    if ex is not None:
        streams.append(ex)
    path = info.weights + 0  # _Sim.group_step's weights + tables, with no tables
    wflow = None
    if path > info.first_tile:
        wflow = sim.weight_flows(path - info.first_tile, cores, count=False)
        streams.append(wflow)
    if out is not None:
        streams.append(out)
    return streams, wflow


def pack_group(sim: Any, info: GroupStatic, staged: tuple[tuple[str, Flows], ...],
               streamed: tuple[Flows, ...], kinds: tuple[tuple[str, str], ...],
               ex: Flows | None, out: Flows | None, cost_of: dict[int, ComputeCost],
               first: Flows | None, cores: tuple[int, ...],
               parts: tuple[tuple[int, ...], ...], cpack: Any = None
               ) -> tuple[bytes, float, float] | None:
    """A group step plan's parts (:class:`sim._plans.StepPlan`'s fields of the same names,
    of a step that gathers no tables and runs no host op: those are priced on the timeline
    in Python) packed for ``_csim.group_step``, with the slowest part's matrix and vector
    cycles (the step's record); None when more scopes, loads or cores than the C step's
    fixed tables hold. ``cpack`` (:func:`load_pack`'s module): packed in C, the same bytes."""
    if len(cores) > MAX_CORES or len(staged) + 1 >= _MAX_LOADS or len(kinds) >= _MAX_LOADS:
        return None
    if cpack is not None:
        return _pack_group_c(cpack, sim, info, staged, streamed, kinds, ex, out, cost_of, first,
                             cores, parts)
    codes: dict[str, int] = {}
    a: list[float] = [len(kinds)]
    for _, kind in kinds:
        a.append(codes.setdefault(kind, len(codes)))
    a.append(len(staged))
    latency_of = sim.latency_of
    for kind, fl in staged:
        a.append(codes.setdefault(kind, len(codes)))
        _flows(a, fl, latency_of(fl))
    tile = info.first_tile
    if tile:
        assert first is not None  # no tables: the plan has the first tile's flows
        a.append(1)
        _flows(a, first, latency_of(first))
        a.append(first.ddr)
    else:
        a.append(0)
    if ex is not None:
        a += (1, ex.noc)
    else:
        a.append(0)
    streams, wflow = _streams(sim, info, streamed, ex, out, cores)
    if len(streams) >= _MAX_LOADS or len(codes) > _MAX_SCOPES:
        return None
    a.append(len(streams))
    for fl in streams:
        _flows(a, fl, latency_of(fl))
    if wflow is not None:
        a += (1, wflow.ddr)
    else:
        a.append(0)
    slowest = max(cost_of.values(), key=lambda c: c.cycles)
    a.append(slowest.cycles)
    a.append(len(cores))
    a += cores
    a.append(sum(len(part) for part in parts))
    for part in parts:
        cost = cost_of[len(part)]
        for c in part:
            a += (c, cost.mme_cycles, cost.vme_cycles)
    return _doubles(a), slowest.mme_cycles, slowest.vme_cycles


def _pack_group_c(cpack: Any, sim: Any, info: GroupStatic,
                  staged: tuple[tuple[str, Flows], ...], streamed: tuple[Flows, ...],
                  kinds: tuple[tuple[str, str], ...], ex: Flows | None, out: Flows | None,
                  cost_of: dict[int, ComputeCost], first: Flows | None, cores: tuple[int, ...],
                  parts: tuple[tuple[int, ...], ...]) -> tuple[bytes, float, float] | None:
    """:func:`pack_group`'s pack made by ``sim/_cpack.c`` (the streams listed here, as there)."""
    tile = info.first_tile
    if tile:
        assert first is not None  # no tables: the plan has the first tile's flows
    streams, wflow = _streams(sim, info, streamed, ex, out, cores)
    if len(streams) >= _MAX_LOADS:
        return None
    slowest = max(cost_of.values(), key=lambda c: c.cycles)
    pk = cpack.pack_group(kinds, staged, first if tile else None, ex, tuple(streams), wflow,
                          slowest.cycles, cores, parts, cost_of, sim.setup, sim.hop_lat,
                          sim.ddr_lat)
    if pk is None:
        return None
    return pk, slowest.mme_cycles, slowest.vme_cycles


def pack_transfer(sim: Any, fl: Flows, gated: bool, cores: tuple[int, ...]) -> bytes | None:
    """A transfer's flows packed for ``_csim.transfer_step`` (``gated``: its destination is
    L1, so it waits for room there), or None when it has more cores than the C step holds."""
    if len(cores) > MAX_CORES:
        return None
    a: list[float] = [1 if gated else 0, len(cores), *cores]
    _flows(a, fl, sim.latency_of(fl))
    return _doubles(a)
