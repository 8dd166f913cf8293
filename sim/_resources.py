"""Shared bandwidth resources of one cluster and first-come-first-served reservations.

A resource is a per-core DMA port, the cluster's LLB port, its DDR channel or a
directed NoC link. A transfer names the bytes it moves on every resource of
its path; it starts when it is ready and every one of those resources is free,
keeps each resource busy for ``bytes / bandwidth`` and ends when the slowest
one is done (plus setup and latency, which occupy nothing). Two transfers on
one link therefore take longer than one: the second waits (contention).
"""

from __future__ import annotations

from collections.abc import MutableSequence
from dataclasses import dataclass
from functools import lru_cache

from compiler.target import Target

__all__ = ["Chip", "Reservations", "chip_of"]


@dataclass(frozen=True)
class Chip:
    """Resource table of one cluster (cluster 0; the others are identical copies).

    Attributes:
        cores: Cores per cluster.
        names: Resource names; ids ``0..cores-1`` are the core DMA ports, then the
            LLB port, the DDR channel and the directed NoC links.
        bytes_per_cycle: Bandwidth of each resource.
        routes: ``(src core, dst core)`` -> link ids of the XY route (empty when
            both cores sit on one router).
    """

    cores: int
    names: tuple[str, ...]
    bytes_per_cycle: tuple[float, ...]
    routes: dict[tuple[int, int], tuple[int, ...]]

    @property
    def llb(self) -> int:
        """Id of the LLB port."""
        return self.cores

    @property
    def ddr(self) -> int:
        """Id of the DDR channel."""
        return self.cores + 1

    def is_link(self, rid: int) -> bool:
        """Whether a resource id is a NoC link."""
        return rid > self.cores + 1


@lru_cache(maxsize=32)
def _chip(target: Target) -> Chip:
    n = target.chip.cores_per_cluster
    names = [f"core{c}.dma" for c in range(n)] + ["llb", "ddr"]
    bw = [target.dma.core_bytes_per_cycle] * n + [target.llb.bytes_per_cycle,
                                                 target.ddr.bytes_per_cycle]
    link_ids: dict[tuple[tuple[int, int], tuple[int, int]], int] = {}
    routes: dict[tuple[int, int], tuple[int, ...]] = {}
    for a in range(n):
        for b in range(n):
            ids = []
            for link in target.route(target.router_of(0, a), target.router_of(0, b)):
                if link not in link_ids:
                    link_ids[link] = len(names)
                    (r0, c0), (r1, c1) = link
                    names.append(f"noc ({r0},{c0})->({r1},{c1})")
                    bw.append(target.noc.link_bytes_per_cycle)
                ids.append(link_ids[link])
            routes[(a, b)] = tuple(ids)
    return Chip(n, tuple(names), tuple(bw), routes)


def chip_of(target: Target) -> Chip:
    """The (cached) resource table of a target's cluster."""
    return _chip(target)


class Reservations:
    """FCFS reservations on a chip's resources, with busy-time accounting.

    Not a value type: one instance lives for one simulation.
    """

    __slots__ = ("busy", "bw", "events", "free_at", "record")

    def __init__(self, chip: Chip, record: bool = True) -> None:
        self.bw = chip.bytes_per_cycle
        # lists, or slices of the compiled step's state (sim._ctime.new_state)
        self.free_at: MutableSequence[float] = [0.0] * len(self.bw)
        self.busy: MutableSequence[float] = [0.0] * len(self.bw)
        self.record = record
        self.events: list[tuple[str, float, tuple[tuple[int, float], ...]]] = []

    def reserve(
        self, label: str, flows: dict[int, float], ready: float, latency: float,
        suffix: str = "",
    ) -> tuple[float, float]:
        """Book a transfer; returns its ``(start, end)`` in cycles.

        Args:
            label: Name for the timeline.
            flows: Resource id -> bytes moved on it.
            ready: Earliest start (data and buffers ready).
            latency: Cycles added to the end that occupy no resource (DMA setup,
                DDR latency, NoC hops).
            suffix: Appended to ``label`` on the timeline (joined only when recorded: a
                simulation for tuning records nothing).
        """
        if not flows:
            return ready, ready
        free_at, bw, busy = self.free_at, self.bw, self.busy
        start = ready
        for r in flows:
            if free_at[r] > start:
                start = free_at[r]
        longest = 0.0
        spans = []
        for r, nbytes in flows.items():
            d = nbytes / bw[r]
            free_at[r] = start + d
            busy[r] += d
            if d > longest:
                longest = d
            spans.append((r, d))
        if self.record:
            self.events.append((label + suffix, start, tuple(spans)))
        return start, start + longest + latency
