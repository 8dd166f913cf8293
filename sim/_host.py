"""Host segments: ops outside the NPU support table run on the host CPU (issue 25 item 2).

An op the NPU cannot run (``Op.on_npu`` false: a ConvTranspose, an einsum imported
as ``call_tir``) is not vector work on the NPU. Its inputs cross PCIe to the host,
the host computes it, and its result crosses back; the NPU cores of its step wait
(the step cannot go on without the result). Priced from the target's ``[host]``
section (``cpu_flops_per_s``, ``pcie_bytes_per_s``, ``pcie_latency_us``, ASSUMED
defaults with their sources in ``compiler/target.py``):

``cycles = (FLOPs / cpu_rate + (input + output bytes) / pcie_rate + 2 x pcie latency)
x clock``

for the samples of the step's chunk. FLOPs of a transposed convolution are twice its
MACs, ``input elements x output channels per group x kernel area``, which the NPU
import does not count (it counts MACs of NPU matrix ops only); other host ops
count their import FLOPs (at least one per output element).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from compiler.memo import memo_of
from compiler.opshape import host_flops

if TYPE_CHECKING:
    from compiler.graph import Graph
    from compiler.target import Target

__all__ = ["HostSegment", "host_flops", "host_ops", "host_segment_cycles"]


@dataclass(frozen=True)
class HostSegment:
    """Ops of one step that ran on the host CPU, and what they cost.

    Attributes:
        step: The step (``group_2[0]``).
        ops: Op types run on the host (``nn.conv2d_transpose``).
        start_cycles: When the inputs started crossing PCIe.
        cycles: Transfers in and out plus host compute.
        flops: Host FLOPs.
        pcie_bytes: Bytes over PCIe, both ways.
    """

    step: str
    ops: tuple[str, ...]
    start_cycles: float
    cycles: float
    flops: float
    pcie_bytes: float

    def to_json(self) -> dict[str, Any]:
        """Keyed JSON."""
        return {"step": self.step, "ops": list(self.ops), "start_cycles": self.start_cycles,
                "cycles": self.cycles, "flops": self.flops, "pcie_bytes": self.pcie_bytes}


def host_ops(graph: Graph, ops: tuple[int, ...]) -> tuple[int, ...]:
    """The ops of a set that run on the host (remembered per op set)."""
    memo = memo_of(graph)
    key = ("sim.host_ops", ops)
    hit: tuple[int, ...] | None = memo.get(key)
    if hit is None:
        hit = memo[key] = tuple(i for i in ops if not graph.ops[i].on_npu)
    return hit


def host_segment_cycles(graph: Graph, ops: tuple[int, ...], samples: int, target: Target
                        ) -> tuple[float, float, float]:
    """``(cycles, FLOPs, PCIe bytes)`` of a step's host ops for ``samples`` samples.

    Every activation input of a host op not made by another host op of the set
    crosses PCIe to the host, every output crosses back (weights do not: the host
    has the model); batched amounts scale with the samples.
    """
    host = host_ops(graph, ops)
    if not host:
        return 0.0, 0.0, 0.0
    scale = samples / graph.batch
    made = {graph.ops[i].output for i in host}
    flops = moved = 0.0
    for i in host:
        op = graph.ops[i]
        per = scale if graph.tensors[op.output].batched else 1.0
        flops += host_flops(graph, op) * per
        moved += graph.nbytes(op.output) * per
        for t in op.inputs:
            if t not in made:
                moved += graph.nbytes(t) * (scale if graph.tensors[t].batched else 1.0)
    h = target.host
    seconds = flops / h.cpu_flops_per_s + moved / h.pcie_bytes_per_s \
        + 2 * h.pcie_latency_us * 1e-6
    return seconds * target.clock_hz, flops, moved
