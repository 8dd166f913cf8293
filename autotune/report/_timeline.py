"""The report's timeline: one row per core, one bar per step, a legend and chunk boundaries.

A group split into chunks runs as one step per chunk (``group_0[0]``, ``group_0[1]``,
...). Its chunks share the group's colour, so back to back on a core they would read
as one bar: a thin dark line marks where each chunk after the first starts on each of
its cores. The legend names the group of each colour (groups beyond the palette share
colours and are listed together), the grey of split/concat transfers and the chunk
boundary line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sim import SimResult

__all__ = ["BOUNDARY_GID", "COLOURS", "chunk_of", "timeline_figure"]

COLOURS = 20  # the tab20 palette
BOUNDARY_GID = "chunk-boundaries"
_LEGEND_NAMES = 3  # group names listed per colour when groups share one


def chunk_of(step_name: str) -> tuple[str, int | None]:
    """``("group_0", 3)`` for ``"group_0[3]"``; ``(name, None)`` for a transfer's name."""
    base, bracket, rest = step_name.rpartition("[")
    if bracket and rest.endswith("]") and rest[:-1].isdigit():
        return base, int(rest[:-1])
    return step_name, None


def _legend_label(names: list[str]) -> str:
    shown = ", ".join(names[:_LEGEND_NAMES])
    more = len(names) - _LEGEND_NAMES
    return (shown + (f" (+{more})" if more > 0 else "")).replace("$", r"\$")


def timeline_figure(r: SimResult) -> Any:
    """A matplotlib ``Figure`` of ``r``'s steps, or None when it has no group step.

    The chunk boundaries are one ``LineCollection`` with gid :data:`BOUNDARY_GID`: one
    vertical segment per (chunk after a group's first, core it runs on), at the
    chunk's compute start.
    """
    import matplotlib
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    groups = [s for s in r.steps if s.kind == "group"]
    if not groups:
        return None
    to_us = 1e6 / r.clock_hz
    cores = sorted({c for s in r.steps for c in s.cores})
    row = {c: i for i, c in enumerate(cores)}
    names = list(dict.fromkeys(chunk_of(s.name)[0] for s in groups))
    colour_of = {n: i % COLOURS for i, n in enumerate(names)}
    bars: dict[tuple[int, int], list[tuple[float, float]]] = {}  # (row, colour) -> spans
    boundaries: list[tuple[tuple[float, float], tuple[float, float]]] = []
    for s in r.steps:
        name, chunk = chunk_of(s.name)
        colour = colour_of[name] if s.kind == "group" else -1
        start = s.start_cycles * to_us
        span = (start, max(s.end_cycles - s.start_cycles, 0.0) * to_us)
        for c in s.cores:
            bars.setdefault((row[c], colour), []).append(span)
            if s.kind == "group" and chunk:
                boundaries.append(((start, row[c] - 0.4), (start, row[c] + 0.4)))
    fig = Figure(figsize=(9.5, 1.0 + 0.28 * max(len(cores), 8)), dpi=100)
    ax = fig.add_subplot()
    tab20 = matplotlib.colormaps["tab20"]

    def cmap(colour: int) -> Any:  # the ten dark hues first, then their light pairs
        return tab20((2 * colour) % COLOURS + (2 * colour) // COLOURS)

    for (y, colour), spans in bars.items():
        ax.broken_barh(spans, (y - 0.4, 0.8), facecolors=cmap(colour) if colour >= 0 else "0.6",
                       linewidth=0)
    handles: list[Any] = []
    for colour in range(min(len(names), COLOURS)):
        sharing = [n for n in names if colour_of[n] == colour]
        handles.append(Patch(facecolor=cmap(colour), label=_legend_label(sharing)))
    if any(s.kind != "group" for s in r.steps):
        handles.append(Patch(facecolor="0.6", label="split/concat transfers"))
    if boundaries:
        from matplotlib.collections import LineCollection

        ax.add_collection(LineCollection(boundaries, colors="0.1", linewidths=0.6,
                                         gid=BOUNDARY_GID))
        handles.append(Line2D([], [], color="0.1", linewidth=0.6,
                              label=f"chunk boundary ({len(boundaries)})"))
    ax.set_yticks(range(len(cores)), [f"core {c}" for c in cores], fontsize=7)
    ax.set_ylim(len(cores) - 0.5, -0.5)  # core 0 on top
    ax.set_xlim(0, r.latency_cycles * to_us)
    ax.set_xlabel("time (µs)")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(handles=handles, fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0),
              title="group (colour)", title_fontsize=6, frameon=False)
    fig.tight_layout()
    return fig
