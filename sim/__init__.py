"""The STCP920 simulator: latency, throughput, resource use and capacity of a schedule.

Example:
    >>> from sim import simulate, lower_bound
    >>> r = simulate(graph, schedule, Target.default())
    >>> r.status, r.chip_throughput_per_s, r.latency_over_bound
    >>> open("trace.json", "w").write(json.dumps(to_chrome_trace(r)))

The model is described in ``sim/README.md``.
"""

from sim._api import simulate, simulate_many
from sim._bound import lower_bound
from sim._measure import MEASURER, MEASURER_VERSION, Measurement, measure
from sim._result import DmaEvent, SimError, SimResult, StepRecord
from sim._trace import to_chrome_trace

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
