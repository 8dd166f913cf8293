"""The feature set: every column :func:`cost_model.features` computes, named and documented.

:data:`FEATURES` is the definition (order = column order); the featuriser fills the
columns (:mod:`cost_model._feature_walk`, ``_fill``). Time columns are divided by
:func:`reference_cycles`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from compiler.bound import roofline_cycles

if TYPE_CHECKING:
    from compiler.graph import Graph
    from compiler.target import Target
    from search_space import Space

__all__ = ["FEATURES", "Feature", "feature_names", "reference_cycles"]


@dataclass(frozen=True)
class Feature:
    """One column: its name and what it measures."""

    name: str
    doc: str


FEATURES: tuple[Feature, ...] = (
    # ---- compute (cycles / reference) ----
    Feature("mme_cycles", "Matrix-engine cycles summed over group chunks, on each chunk's busiest "
            "core, with matrix work padded to the array's granule and the per-instruction overhead."),
    Feature("mme_useful_cycles", "The same without padding or overhead (MACs / MACs per cycle)."),
    Feature("mme_pad_waste", "Share of the matrix engine's time lost to padding and instruction "
            "overhead: 1 - useful / padded (0 without matrix work)."),
    Feature("vme_cycles", "Vector-engine cycles summed over chunks (busiest core; exp, erf, divide "
            "at the transcendental rate)."),
    Feature("move_cycles", "L1-local data movement summed over chunks (transposes, concats, "
            "gathered rows, inputs re-read when an op's weights exceed half the weight buffer)."),
    Feature("weight_bound_cycles", "Summed over chunks and ops: the longer of an op's matrix time "
            "and the time its weights take to reach the weight buffer (uncontended weight path)."),
    Feature("compute_serial", "Summed over chunks: max(matrix, vector, move, weight bound) + "
            "pipeline fill on the busiest core: the compute time if no two steps overlapped."),
    Feature("compute_group_critical", "Summed over groups: the busiest core's compute within the "
            "group (chunks on disjoint cores overlap, chunks sharing cores queue)."),
    Feature("core_busy_max", "Largest compute time of one core over the whole schedule: the "
            "compute time if steps on different cores overlapped perfectly."),
    Feature("core_busy_mean", "Mean compute time per core (total work / cores)."),
    Feature("core_imbalance", "core_busy_max / core_busy_mean (1 = perfectly balanced cores)."),
    # ---- memory traffic (cycles at the bandwidth / reference) ----
    Feature("ddr_cycles", "All DDR bytes (weights, results written to or read from DDR, model "
            "inputs and outputs, gathered table rows) / DDR bytes per cycle."),
    Feature("ddr_weight_cycles", "Weight bytes read from DDR (once per chunk with the LLB "
            "broadcast, once per core without) / DDR bytes per cycle."),
    Feature("ddr_act_cycles", "Activation bytes through DDR / DDR bytes per cycle."),
    Feature("llb_cycles", "Bytes through the LLB port (broadcast weights in and out, results "
            "written to and read from the LLB) / LLB bytes per cycle."),
    Feature("noc_cycles", "Bytes moved between cores' L1 over the NoC / link bytes per cycle."),
    Feature("noc_hops", "Mean XY-route hops per NoC byte (0 without NoC traffic)."),
    Feature("port_max_cycles", "Bytes through the busiest core's DMA port (weights into its weight "
            "buffer, inputs staged into its L1, results it sends to LLB/DDR or other cores) / "
            "port bytes per cycle."),
    Feature("group_roofline_cycles", "Summed over groups: the slowest of the group's compute "
            "(busiest core), its DDR, LLB and NoC bytes (its chunks' weights and results, its "
            "inputs) and its busiest DMA port: each group at its own bottleneck, one after another."),
    Feature("group_staged_cycles", "Summed over groups: inputs staged into L1 before the "
            "group computes (over the NoC, from LLB/DDR when it cannot stream them, through "
            "split/concat transfers), then the slowest of its compute and its streamed traffic "
            "(weights, streamed inputs, results written out)."),
    Feature("staged_load_cycles", "The staged part alone: the slowest of DDR, LLB and NoC for "
            "the inputs staged before each group, summed over groups."),
    Feature("weight_reload", "Weight bytes loaded from DDR / the model's weight bytes (>= 1: "
            "every extra chunk of a group reloads the group's weights)."),
    Feature("l1_reuse", "Share of the activation bytes groups read that are already in the "
            "consumer core's L1 (reused in place, no transfer)."),
    Feature("act_l1_share", "Share of group result bytes placed in L1."),
    Feature("act_llb_share", "Share of group result bytes placed in the LLB."),
    Feature("act_ddr_share", "Share of group result bytes placed in DDR."),
    # ---- structure ----
    Feature("steps_log2", "log2 of the number of steps (group chunks + split/concat transfers)."),
    Feature("groups_per_op", "Groups / ops (1 = every op its own group)."),
    Feature("chunks_mean_log2", "log2 of the mean split factor (chunks per group), weighted by "
            "each group's share of the ops."),
    Feature("chunks_max_log2", "log2 of the largest split factor."),
    Feature("transfers_per_step", "Split/concat transfers / steps."),
    Feature("step_overhead_cycles", "Steps x (DMA descriptor setup + DDR latency): the fixed cost "
            "of issuing every step, / reference."),
    Feature("cores_per_step", "Mean cores a group chunk runs on / cores per cluster."),
    Feature("cores_per_part", "Mean cores sharing one sample (cores per part) / cores per cluster."),
    Feature("samples_per_core", "Mean samples' worth of work per core of a chunk / batch."),
    Feature("interleave", "Share of consecutive steps that belong to different groups or "
            "transfers (depth-first waves are high, breadth-first low)."),
    # ---- capacity (the shared capacity model's working sets and result sizes) ----
    Feature("ws_peak_l1", "Largest per-core working set of a chunk (compiler.footprint, inputs "
            "staged, as the capacity model counts it) / L1 data bytes."),
    Feature("l1_peak_est", "Largest L1 use of one core estimated at group boundaries: the "
            "producer group's L1 results, the consumer's, and the consumer's working set / L1 "
            "data bytes (groups cut where one tensor crosses hold little else). 1 - headroom."),
    Feature("llb_peak_est", "Largest LLB use estimated at group boundaries (producer's and "
            "consumer's LLB results) / LLB bytes."),
)
_INDEX = {f.name: i for i, f in enumerate(FEATURES)}


def feature_names(space: Space | None = None) -> list[str]:
    """Column names of :func:`features`, in order (see :data:`FEATURES` for what each means).

    With ``space``, the space's parameters follow as ``space.<parameter name>``.
    """
    names = [f.name for f in FEATURES]
    if space is not None:
        names += [f"space.{d.name}" for d in space.free]
    return names


def reference_cycles(graph: Graph, target: Target) -> float:
    """The roofline of one inference of ``graph`` (its batch) on one cluster, in cycles.

    The simulator's lower bound without the host launch, from its one definition
    (:func:`compiler.bound.roofline_cycles`: matrix work on the array in whole granules
    with one instruction each, MACs at peak, vector work over every core's lanes, all of
    it over both engines, and the compulsory DDR bytes at the DDR rate), at least one
    cycle. Time features are divided by it.
    """
    return max(roofline_cycles(graph, graph.batch, target), 1.0)
