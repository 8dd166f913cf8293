"""graphtune's top layer: tuning, ApplyHistoryBest and the CLI."""

__all__: list[str] = []
