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

``GRAPHTUNE_PURE_SIM=1`` forces the Python step (read when a simulation starts; separate
from ``GRAPHTUNE_PURE_PYTHON``, which forces the Python decoder). A simulation that records
its timeline (``timeline=True``) runs the Python step. When the extension is missing (no C
compiler at install time) or fails to import, the simulator warns once and runs in Python.
"""

from __future__ import annotations

import importlib
import os
import sys
from array import array
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sim._flows import Flows

__all__ = ["available", "built", "load", "new_state", "pack_group", "pure_forced"]

_state: dict[str, Any] = {"warned": False, "loaded": False, "mod": None}
_ENV = "GRAPHTUNE_PURE_SIM"
_MAX_SCOPES = 8  # sim/_csim.c's MAX_SCOPES, MAX_LOADS, MAX_CORES
_MAX_LOADS = 64
_MAX_CORES = 256


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
            _state["mod"] = importlib.import_module("sim._csim")
        except ImportError as exc:
            _state["mod"] = None
            if not _state["warned"]:
                _state["warned"] = True
                sys.stderr.write(f"graphtune: warning: the compiled simulator step is not "
                                 f"available ({exc}); simulating in Python (slower; see "
                                 "README, Install)\n")
    return _state["mod"]


def available() -> bool:
    """Whether simulations use the compiled step (built, importable and not disabled)."""
    return load() is not None


def new_state(bw: tuple[float, ...], cores: int, l1_cap: float) -> tuple[array, memoryview]:
    """A simulation's state for ``sim/_csim.c`` (its layout is in that file's doc) and a
    memoryview of it (slice it for the Python steps)."""
    r = len(bw)
    st = array("d", [float(r), float(cores), float(l1_cap), *bw])
    st.extend([0.0] * (3 * r + 5 * cores - r))
    return st, memoryview(st)


def _flows(out: array, fl: Flows, latency: float) -> None:
    out.append(latency)
    out.append(fl.noc)
    out.append(len(fl.incoming))
    for c, b in fl.incoming.items():
        out.append(c)
        out.append(b)
    out.append(len(fl.flows))
    for r, b in fl.flows.items():
        out.append(r)
        out.append(b)


def pack_group(plan: Any, sim: Any, cores: tuple[int, ...],
               parts: tuple[tuple[int, ...], ...]) -> tuple[bytes, float, float] | None:
    """A group step plan (:class:`sim._plans.StepPlan`) packed for ``_csim.group_step``,
    with the slowest part's matrix and vector cycles (the step's record), or None when the
    C step does not take it (gathered tables or host ops: priced on the timeline in Python;
    more scopes, loads or cores than its fixed tables hold)."""
    if plan.cost_of is None or plan.host[0] or plan.work.gathers:
        return None
    info = plan.info
    if len(cores) > _MAX_CORES or len(plan.staged) + 1 >= _MAX_LOADS:
        return None
    if any(c >= sim.n for c in cores):
        return None
    codes: dict[str, int] = {}

    def code(scope: str) -> int:
        return codes.setdefault(scope, len(codes))

    a = array("d")
    a.append(len(plan.kinds))
    for _, kind in plan.kinds:
        a.append(code(kind))
    a.append(len(plan.staged))
    for kind, fl in plan.staged:
        a.append(code(kind))
        _flows(a, fl, sim.latency_of(fl))
    first = info.first_tile
    if first:
        fl = plan.first
        a.append(1)
        _flows(a, fl, sim.latency_of(fl))
        a.append(fl.ddr)
    else:
        a.append(0)
    streams = list(plan.streamed)
    if plan.ex is not None:
        a.append(1)
        a.append(plan.ex.noc)
        streams.append(plan.ex)
    else:
        a.append(0)
    path = info.weights + 0
    wflow = None
    if path > first:
        wflow = sim.weight_flows(path - first, cores, count=False)
        streams.append(wflow)
    if plan.out is not None:
        streams.append(plan.out)
    if len(streams) > _MAX_LOADS or len(codes) > _MAX_SCOPES:
        return None
    a.append(len(streams))
    for fl in streams:
        _flows(a, fl, sim.latency_of(fl))
    if wflow is not None:
        a.append(1)
        a.append(wflow.ddr)
    else:
        a.append(0)
    slowest = max(plan.cost_of.values(), key=lambda c: c.cycles)
    a.append(slowest.cycles)
    a.append(len(cores))
    a.extend(float(c) for c in cores)
    entries = [(c, plan.cost_of[len(part)]) for part in parts for c in part]
    a.append(len(entries))
    for c, cost in entries:
        a.append(c)
        a.append(cost.mme_cycles)
        a.append(cost.vme_cycles)
    return a.tobytes(), slowest.mme_cycles, slowest.vme_cycles
