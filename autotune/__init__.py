"""graphtune's top layer: tuning, ApplyHistoryBest and the CLI."""

from autotune._apply_history import ApplyHistoryBest

__all__ = ["ApplyHistoryBest"]
