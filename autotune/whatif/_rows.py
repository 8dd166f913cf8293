"""What a sweep returns: one row per model and variant, and the sweep's result."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["SweepResult", "SweepRow"]


@dataclass(frozen=True)
class SweepRow:
    """One model on one variant.

    Attributes:
        model: The model's name.
        variant: The variant's name (its records' chip).
        target_key: ``chip:hash`` of its records.
        values: Swept key -> value.
        status: ``"ok"``, ``"infeasible"`` or ``"not run"`` (cut by the time budget).
        reason: Why infeasible (a capacity message), else ``""``.
        best_us: Best latency of one inference (its tasks' best, weighted).
        throughput_per_s: Samples per second at ``best_us``.
        bound_us: The roofline lower bound (same weighting).
        floor: What the bound is: ``"compute"`` or ``"DDR"`` (of the heaviest task).
        limit: What bounds the best schedule: the busiest resource of its simulation.
        o3_us: Latency under O3 (None: O3 does not fit).
        speedup_over_o3: ``o3_us / best_us``.
        measurements: Records of the variant's tasks in the log.
    """

    model: str
    variant: str
    target_key: str
    values: dict[str, Any]
    status: str
    reason: str = ""
    best_us: float | None = None
    throughput_per_s: float | None = None
    bound_us: float | None = None
    floor: str = ""
    limit: str = ""
    o3_us: float | None = None
    speedup_over_o3: float | None = None
    measurements: int = 0

    def to_json(self) -> dict[str, Any]:
        """Keyed JSON (a line of ``table.json``)."""
        return {"model": self.model, "variant": self.variant, "target_key": self.target_key,
                "values": self.values, "status": self.status, "reason": self.reason,
                "best_us": self.best_us, "throughput_per_s": self.throughput_per_s,
                "bound_us": self.bound_us, "floor": self.floor, "limit": self.limit,
                "o3_us": self.o3_us, "speedup_over_o3": self.speedup_over_o3,
                "measurements": self.measurements}


@dataclass
class SweepResult:
    """What :func:`sweep` returns.

    Attributes:
        rows: One per (model, variant), variants in sweep order.
        keys: The swept keys.
        measured: Measurements made by this run (a resumed sweep: only the new ones).
        files: Files written (table, plots, hardware files).
        notes: Lines for the user (pre-trained model use, infeasible variants).
    """

    rows: list[SweepRow]
    keys: list[str]
    measured: int = 0
    files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# ---- feasibility ---------------------------------------------------------------------------------
