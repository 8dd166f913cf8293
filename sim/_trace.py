"""Chrome / Perfetto trace of a simulated inference (open in ui.perfetto.dev or chrome://tracing)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sim._result import SimResult

if TYPE_CHECKING:
    from compiler.graph import Graph
    from compiler.schedule import GraphSchedule

__all__ = ["to_chrome_trace"]


def to_chrome_trace(result: SimResult, graph: Graph | None = None,
                    schedule: GraphSchedule | None = None) -> dict[str, Any]:
    """The result's timeline as a Chrome trace-event JSON object.

    One process (the cluster); one track per core's step, matrix engine, vector
    engine and DMA port, then the LLB port, the DDR channel and each NoC link.
    Times are microseconds at the target clock. Every transfer event's ``args``
    holds the bytes it moved over its resource; with the ``graph`` and the
    ``schedule`` that was simulated, every step event's ``args`` also names the
    ops its group runs (``ops``: the graph's op names, ``op_types``).

    Example:
        >>> json.dump(to_chrome_trace(simulate(graph, schedule, target)), open("t.json", "w"))
    """
    scale = 1e6 / result.clock_hz
    tracks: dict[str, int] = {}
    events: list[dict[str, Any]] = []

    def tid(name: str) -> int:
        if name not in tracks:
            tracks[name] = len(tracks) + 1
        return tracks[name]

    cores = sorted({c for st in result.steps for c in st.cores})
    for c in cores:
        for kind in ("step", "mme", "vme", "dma"):
            tid(f"core{c}.{kind}")
    tid("llb")
    tid("ddr")

    def add(name: str, track: str, start: float, dur: float, args: dict[str, Any]) -> None:
        if dur <= 0:
            return
        events.append({"name": name, "cat": track.split(".")[-1], "ph": "X", "pid": 0,
                       "tid": tid(track), "ts": start * scale, "dur": dur * scale,
                       "args": args})

    ops_of: dict[str, tuple[int, ...]] = {}
    if graph is not None and schedule is not None:
        ops_of = {gr.name: gr.ops for gr in schedule.groups}
    for st in result.steps:
        if st.kind != "group":
            continue
        args: dict[str, Any] = {"mem_scope": st.mem_scope, "l1_bytes": st.l1_bytes,
                                "load_cycles": st.load_end_cycles - st.load_start_cycles}
        ops = ops_of.get(st.name.split("[", 1)[0])
        if ops is not None and graph is not None:
            args["ops"] = [graph.ops[i].name for i in ops]
            args["op_types"] = [graph.ops[i].op_type for i in ops]
        for c in st.cores:
            add(st.name, f"core{c}.step", st.start_cycles, st.end_cycles - st.start_cycles, args)
            add(st.name, f"core{c}.mme", st.start_cycles, st.mme_cycles, {})
            add(st.name, f"core{c}.vme", st.start_cycles, st.vme_cycles, {})
    for ev in result.dma_events:
        add(ev.label, ev.resource, ev.start_cycles, ev.duration_cycles, {"bytes": ev.nbytes})
    for hs in result.host_segments:  # ops off the NPU, on the host CPU
        add(f"{hs.step} host: {', '.join(hs.ops)}", "host", hs.start_cycles, hs.cycles,
            {"flops": hs.flops, "pcie_bytes": hs.pcie_bytes})
    meta: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "cluster 0"}}
    ]
    for name, t in tracks.items():
        meta.append({"name": "thread_name", "ph": "M", "pid": 0, "tid": t, "args": {"name": name}})
        meta.append({"name": "thread_sort_index", "ph": "M", "pid": 0, "tid": t,
                     "args": {"sort_index": t}})
    return {"traceEvents": meta + events, "displayTimeUnit": "ns",
            "otherData": {"latency_us": result.latency_us, "batch": result.batch}}
