"""Issue 25: places where the simulator charged less than the hardware would.

Each test failed on the code before its fix; its docstring gives the
first-principles figure it checks against.
"""

from __future__ import annotations

import pytest
from onnx import helper as h

from compiler.auto import graph_schedule_level
from compiler.graph import Graph
from compiler.schedule import GraphSchedule, make_schedule
from compiler.target import Target
from sim import SimError, SimResult, simulate, to_chrome_trace
from tests.sim.conftest import group, onnx_graph, w
from tests.sim.test_cost_terms import gather_graph

ONE_PER_CORE = [[c] for c in range(8)]


def ok(r: SimResult | SimError) -> SimResult:
    assert isinstance(r, SimResult), r
    return r


def step(r: SimResult, name: str) -> float:
    """Compute time of one step, in cycles."""
    s = next(s for s in r.steps if s.name == name)
    return s.end_cycles - s.start_cycles


# ---- item 1: a view opening a group does not move its input into L1 ---------------------------
def bert_projection_cut(g: Graph, first: int) -> GraphSchedule:
    """BERT-base layer 0 with its attention output projection alone in a group.

    Ops 7-23 are the attention up to ``permute_dims_3``, op 24 the reshape back to
    (tokens, 768), 25-26 the projection matmul and its bias add. ``first`` is 24
    (the reshape opens the projection's group) or 25 (it closes the producer's
    group): physically the same schedule, every result in DDR.
    """
    assert g.ops[24].op_type == "reshape" and g.ops[25].op_type == "matmul"
    n = len(g.ops)
    return make_schedule(g, [
        group("embed", range(0, 7), "DDR", ONE_PER_CORE),
        group("attention", range(7, first), "DDR", ONE_PER_CORE),
        group("projection", range(first, 27), "DDR", ONE_PER_CORE),
        group("rest", range(27, n), "DDR", ONE_PER_CORE),
    ])


def test_a_view_opening_a_group_still_streams_its_input_per_weight_tile(
        bert128: Graph, target: Target) -> None:
    """BERT-base s128 b8, attention output projection, input in DDR.

    First principles: the projection's 768 x 768 FP16 weights (1,179,648 B) pass
    the weight buffer in 9 tiles of 128 KiB, so the 8 x 128 x 768 FP16 input
    (1,572,864 B) is read 9 times from DDR at 27 B/cycle: at least 524,288
    cycles, wherever the reshape sits. Before the fix the reshape opening the
    group hid the input "inside" it: 155,801 cycles (8 passes at L1 speed)
    against 621,835 with the reshape in the producer's group.
    """
    opened = ok(simulate(bert128, bert_projection_cut(bert128, 24), target))
    closed = ok(simulate(bert128, bert_projection_cut(bert128, 25), target))
    floor = 9 * 1_572_864 / target.ddr.bytes_per_cycle
    assert floor == pytest.approx(524_288)
    a, b = step(opened, "projection[0]"), step(closed, "projection[0]")
    assert a >= floor and b >= floor
    assert a == pytest.approx(b, rel=0.01)
    assert opened.latency_us == pytest.approx(closed.latency_us, rel=0.01)
    assert opened.ddr_bytes == pytest.approx(closed.ddr_bytes, rel=0.01)


# ---- item 3: convolution halos and streaming windows take L1 -----------------------------------
def dilated_conv(dilation: int, channels: int = 256, relu_first: bool = True) -> Graph:
    """One sample, ``channels`` x 64 x 64, a 3x3 convolution with ``dilation`` (same size out).

    With ``relu_first`` a relu feeds it inside the group, so its input is staged in
    L1; without, its input streams from DDR.
    """
    conv = h.make_node("Conv", ["y" if relu_first else "x", "W"], ["out"], pads=[dilation] * 4,
                       dilations=[dilation, dilation])
    nodes = [h.make_node("Relu", ["x"], ["y"]), conv] if relu_first else [conv]
    shape = [1, channels, 64, 64]
    return onnx_graph(nodes, {"x": shape}, {"out": shape}, {"W": w(channels, channels, 3, 3)})


def on_eight_cores(g: Graph) -> GraphSchedule:
    """The whole graph in one group, its one sample's rows cut over cores 0-7."""
    return make_schedule(g, [group("G", range(len(g.ops)), "DDR", [list(range(8))])])


def test_a_dilated_conv_cut_over_cores_is_refused_for_its_halo(target: Target) -> None:
    """3x3 conv, dilation 18, 256 channels, 64 x 64, one sample on 8 cores.

    First principles: a core holds 8 of the 64 input rows (8 x 64 x 256 x 2 =
    262,144 B) and needs the 18 rows above and below them: 36 rows of 32 KiB =
    1,179,648 B of halo, more than the 1 MiB L1 on its own. Before the fix it was
    accepted with 278,528 B peak L1.
    """
    r = simulate(dilated_conv(18), on_eight_cores(dilated_conv(18)), target)
    assert isinstance(r, SimError) and r.status == "capacity", r
    assert r.needed_bytes >= 262_144 + 1_179_648
    assert "halo" in r.message
    halo = [b for what, b in r.live_tensors if "halo" in what]
    assert halo == [1_179_648]


def test_a_dilated_conv_streaming_from_ddr_needs_its_window_of_rows(target: Target) -> None:
    """The same convolution reading its input straight from DDR.

    First principles: an output row reads 18 x 2 + 1 = 37 input rows; with the
    input streamed those rows must sit in L1 together: 37 x 64 x 256 x 2 =
    1,212,416 B > 1 MiB. Before the fix the stream was two 8 KiB tiles whatever the
    kernel, and the schedule was accepted.
    """
    g = dilated_conv(18, relu_first=False)
    r = simulate(g, on_eight_cores(g), target)
    assert isinstance(r, SimError) and r.status == "capacity", r
    assert r.needed_bytes >= 37 * 64 * 256 * 2
    assert "window" in r.message


def test_a_plain_conv_cut_over_cores_holds_its_halo_rows(target: Target) -> None:
    """3x3 conv (dilation 1), 256 x 64 x 64, one sample on 8 cores, relu before it in L1.

    First principles: a middle core holds its 8 rows of the conv's input (262,144 B,
    overwritten by its output rows as they are made), one row from each neighbour
    (2 x 32,768 B) and the two 8 KiB stream tiles in and out (32,768 B): 360,448 B.
    Before the fix the halo took no room: 294,912 B.
    """
    r = ok(simulate(dilated_conv(1), on_eight_cores(dilated_conv(1)), target))
    assert r.peak_l1_bytes == 262_144 + 65_536 + 32_768


def test_a_halo_from_cores_further_than_the_neighbour_crosses_more_links(target: Target) -> None:
    """Halo rows that come from two or three cores away cross more NoC links per byte.

    16 channels x 64 x 64 on 8 cores: a core holds 8 rows. Dilation 4 needs 4 rows
    each side (all from the neighbour); dilation 18 needs 18 each side: 8 from the
    neighbour, 8 from the next core, 2 from the third. Bytes that come from further
    away use at least the links the neighbour's do, on this mesh strictly more.
    Before the fix every halo byte went to the neighbour only.
    """
    per_byte = []
    for dil in (4, 18):
        g = dilated_conv(dil, channels=16)
        r = ok(simulate(g, on_eight_cores(g), target))
        link_bytes = sum(b for name, b in r.busy_cycles.items() if name.startswith("noc")) \
            * target.noc.link_bytes_per_cycle
        per_byte.append(link_bytes / r.noc_bytes)
    assert per_byte[1] > per_byte[0] * 1.2


# ---- item 6: weight tiles on their way through the LLB take LLB room ----------------------------
def test_weight_tiles_passing_the_llb_count_in_its_capacity(target: Target) -> None:
    """An LLB kept 128 KiB short of full while a matmul with 512 KiB of weights runs.

    First principles: the weights are broadcast from DDR through the LLB to the
    cores' weight buffers, two 128 KiB tiles in flight (double buffering): 262,144 B
    of LLB on top of the 8,257,536 B activation the matmul streams from there,
    8,519,680 B > 8 MiB. Before the fix the LLB held only the activation and the
    schedule was accepted.
    """
    rows = (8 * 2**20 - 128 * 2**10) // (512 * 2) // 8  # rows per sample, 8 samples
    nodes = [h.make_node("Relu", ["x"], ["y"]), h.make_node("MatMul", ["y", "W"], ["out"])]
    g = onnx_graph(nodes, {"x": [8, rows, 512]}, {"out": [8, rows, 512]}, {"W": w(512, 512)})
    s = make_schedule(g, [group("A", [0], "LLB", ONE_PER_CORE),
                          group("B", [1], "DDR", ONE_PER_CORE)])
    r = simulate(g, s, target)
    assert isinstance(r, SimError) and r.status == "capacity", r
    assert r.resource == "LLB of cluster 0"
    assert r.needed_bytes == 8 * rows * 512 * 2 + 2 * 128 * 2**10
    assert any("weight tiles" in what for what, _ in r.live_tensors)


# ---- item 4: attention has one split for compute, NoC and L1 ------------------------------------
def attention(heads: int) -> Graph:
    """softmax(Q Kᵀ) V for one sample, ``heads`` heads of 128 tokens x 64 (Q, Kᵀ, V in DDR)."""
    nodes = [h.make_node("MatMul", ["q", "kt"], ["s"]),
             h.make_node("Softmax", ["s"], ["p"], axis=-1),
             h.make_node("MatMul", ["p", "v"], ["o"])]
    return onnx_graph(nodes, {"q": [1, heads, 128, 64], "kt": [1, heads, 64, 128],
                              "v": [1, heads, 128, 64]}, {"o": [1, heads, 128, 64]}, {})


def test_attention_l1_is_the_busiest_cores_heads(target: Target) -> None:
    """12 and 16 heads of one sample on 8 cores: the busiest core has 2 whole heads in both.

    First principles: heads go to cores whole (as the compute is priced), so the
    busiest core holds the same data either way (2 heads of Q, scores, output, and
    the whole K and V of its 2 heads): the same L1, 163,840 B. Before the fix L1
    was an even byte split, 1.5 heads' worth for 12 heads: 131,072 B.
    """
    peaks = []
    for heads in (12, 16):
        g = attention(heads)
        r = ok(simulate(g, on_eight_cores(g), target))
        peaks.append(r.peak_l1_bytes)
        assert r.steps[0].mme_cycles == 2 * (1280 + 896)  # 2 heads: Q Kᵀ 1,280, P V 896 cycles
    assert peaks[0] == peaks[1] == 163_840


def test_attention_exchanges_the_k_and_v_of_each_head_once(target: Target) -> None:
    """12 heads of one sample on 8 cores, heads split over the cores.

    First principles: the core computing a head needs its whole K and V; the rows
    were cut over the 8 cores, so 7/8 of them come from other cores, once per head:
    7/8 x (196,608 + 196,608) = 344,064 B. Before the fix every core fetched all of
    K and V at every cut as if rows were split: 7 x 393,216 = 2,752,512 B.
    """
    g = attention(12)
    r = ok(simulate(g, on_eight_cores(g), target))
    assert r.noc_bytes == pytest.approx(7 / 8 * 2 * 196_608)


# ---- item 2: ops off the NPU are host segments ----------------------------------------------------
def conv_then(transposed: bool) -> Graph:
    """A 3x3 conv then a 3x3 Conv or ConvTranspose, 8 x 64 x 56 x 56 (same shapes, same MACs)."""
    kind = "ConvTranspose" if transposed else "Conv"
    nodes = [h.make_node("Conv", ["x", "W1"], ["y"], pads=[1, 1, 1, 1]),
             h.make_node(kind, ["y", "W2"], ["out"], pads=[1, 1, 1, 1])]
    return onnx_graph(nodes, {"x": [8, 64, 56, 56]}, {"out": [8, 64, 56, 56]},
                      {"W1": w(64, 64, 3, 3), "W2": w(64, 64, 3, 3)})


def test_a_conv_transpose_off_the_npu_is_a_host_segment(target: Target) -> None:
    """The ConvTranspose is not in the NPU's op table: it runs on the host.

    First principles: 8 x 64 x 56 x 56 inputs x 64 x 3 x 3 = 924,844,032 MACs,
    1.85 GFLOP, at the host's 1 TFLOP/s (ASSUMED default) at least 1,850 µs, plus
    its 3.2 MB in and out over PCIe (25 GB/s): 128 µs, and two PCIe latencies.
    Before the fix it counted as 1.6 M vector FLOPs on the NPU and the model
    simulated exactly as fast as the one with a Conv (254.1 µs).
    """
    conv, trans = conv_then(False), conv_then(True)
    assert not trans.ops[1].on_npu
    a = ok(simulate(conv, graph_schedule_level(conv, target, 3), target))
    b = ok(simulate(trans, graph_schedule_level(trans, target, 3), target))
    assert b.latency_us > a.latency_us
    assert [s.ops for s in b.host_segments] == [("nn.conv2d_transpose",)]
    seg = b.host_segments[0]
    assert seg.flops == 2 * 924_844_032
    pcie = 2 * 8 * 64 * 56 * 56 * 2  # in and out (the host has the weights)
    floor_us = seg.flops / 1e12 * 1e6 + pcie / 25e9 * 1e6 + 2 * 5.0
    assert target.cycles_to_us(seg.cycles) == pytest.approx(floor_us)
    assert b.latency_us >= floor_us
    assert b.to_json()["host_segments"][0]["ops"] == ["nn.conv2d_transpose"]
    assert any(e.get("tid") is not None and "host" in e["name"]
               for e in to_chrome_trace(b)["traceEvents"] if e.get("ph") == "X")
    assert not a.host_segments


# ---- item 5: every gathered row is a DMA descriptor ----------------------------------------------
def test_each_gathered_row_costs_a_dma_descriptor(target: Target) -> None:
    """8 samples x 1,024 lookups of 16-byte rows from a 1.6 MB table in DDR, one sample a core.

    First principles: rows are scattered, so each is its own DMA descriptor; a core
    gathers its 1,024 rows at ``dma.setup_cycles`` (100) each plus one 32-byte
    burst at 64 B/cycle: at least 1,024 x 100.5 = 102,912 cycles. Before the fix the
    rows moved as one stream (8 x 1,024 x 32 B at 27 B/cycle, 9,709 cycles) and the
    whole inference took 26,577 cycles, launch included.
    """
    g = gather_graph(8, 1024, 100_000, 8)
    r = ok(simulate(g, make_schedule(g, [group("G", range(len(g.ops)), "DDR", ONE_PER_CORE)]),
                    target))
    floor = 1024 * (target.dma.setup_cycles + 32 / target.dma.core_bytes_per_cycle)
    assert floor == pytest.approx(102_912)
    assert r.latency_cycles >= floor
    assert r.busy_cycles["core0.dma"] >= floor
