"""The STCP920 simulator: latency, throughput, resource use and capacity of a schedule.

Example:
    >>> from sim import simulate, lower_bound
    >>> r = simulate(graph, schedule, Target.default())
    >>> r.status, r.chip_throughput_per_s, r.latency_over_bound
    >>> open("trace.json", "w").write(json.dumps(to_chrome_trace(r)))

The model is described in ``sim/README.md``.

The bound's terms (``lower_bound``, ``compulsory_ddr_bytes``) live in
:mod:`compiler.bound`, shared with the cost model and the report.
"""

from compiler.bound import lower_bound
from compiler.moved import keep_old_paths
from sim._api import simulate, simulate_many
from sim._measure import MEASURER, MEASURER_VERSION, Measurement, measure
from sim._result import DmaEvent, SimError, SimResult, StepRecord
from sim._trace import to_chrome_trace

# sim._bound moved to compiler.bound in 0.1; the old path imports, with a
# DeprecationWarning, until 0.2.
keep_old_paths({"sim._bound": "compiler.bound"}, version="0.2")

__all__ = [
    "MEASURER",
    "MEASURER_VERSION",
    "DmaEvent",
    "Measurement",
    "SimError",
    "SimResult",
    "StepRecord",
    "lower_bound",
    "measure",
    "simulate",
    "simulate_many",
    "to_chrome_trace",
]
