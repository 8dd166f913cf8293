"""The manual-schedule guide's worked figures, the calibration point and the O0-O3 ordering."""

from __future__ import annotations

import pytest

from compiler.auto import graph_schedule_level
from compiler.capacity import STREAM_TILE_ELEMENTS
from compiler.footprint import group_footprint, sample_bytes
from compiler.graph import Graph
from compiler.guide_plans import guide_plan
from compiler.target import Target
from sim import SimError, SimResult, simulate
from tests.sim.conftest import residual_adds, resnet_guide_plan, zoo_graph

KIB = 1024
BYTEMLPERF_RESNET50_FP16 = 8726  # images/s for the whole card (ByteMLPerf, vendor backend)


def ok(r: SimResult | SimError) -> SimResult:
    assert isinstance(r, SimResult), r
    return r


@pytest.fixture(scope="module")
def bert256() -> Graph:
    return zoo_graph("bert_base", 8, seq=256)


def per_sample_of_shape(g: Graph, shape: tuple[int, ...]) -> int:
    name = next(n for n, t in g.tensors.items() if t.kind == "activation" and t.shape == shape)
    return sample_bytes(g, name)[0]


# ---- BERT-base -----------------------------------------------------------------------------
def test_bert_s1_s2_s3(bert128: Graph, bert256: Graph) -> None:
    assert per_sample_of_shape(bert128, (8, 128, 768)) == 192 * KIB  # S1
    assert per_sample_of_shape(bert128, (8, 12, 128, 128)) == 384 * KIB  # S2
    assert per_sample_of_shape(bert128, (8, 128, 3072)) == 768 * KIB  # S3
    # at seq 256 S2 and S3 are 1536 KiB each: more than one core's L1
    assert per_sample_of_shape(bert256, (8, 12, 256, 256)) == 1536 * KIB
    assert per_sample_of_shape(bert256, (8, 256, 3072)) == 1536 * KIB


def test_bert_guide_plan_fits_one_sample_per_core(bert128: Graph, target: Target) -> None:
    s = guide_plan("bert_base", bert128)
    assert all(len(part) == 1 for g in s.groups for c in g.chunks for part in c.core_bind)
    assert {c.mem_scope for g in s.groups[:-1] for c in g.chunks} == {"L1"}
    r = ok(simulate(bert128, s, target))
    # the peak is the FFN: S3 plus the S1 kept for the residual add
    assert r.peak_l1_bytes == (768 + 192) * KIB <= target.l1.data_bytes
    # the LLB holds only the weight tiles passing through it (two of 128 KiB)
    assert r.peak_llb_bytes == target.l1.weight_bytes and r.noc_bytes == 0


def test_bert_guide_plan_at_seq_256_overflows_l1(bert256: Graph, target: Target) -> None:
    err = simulate(bert256, guide_plan("bert_base", bert256), target)
    assert isinstance(err, SimError) and err.status == "capacity"
    assert err.resource.startswith("L1 of core ")
    assert err.needed_bytes > err.available_bytes == target.l1.data_bytes
    assert err.live_tensors


# ---- DeepFM ------------------------------------------------------------------------------------
def test_deepfm_guide_plan_at_320_per_core(deepfm: Graph, target: Target) -> None:
    assert deepfm.batch == 320 * 8
    fp = group_footprint(deepfm, range(len(deepfm.ops)))
    # the guide sums every tensor of one sample: 2.7 KiB; live ranges need no more
    assert fp.input_sample_bytes + fp.output_sample_bytes <= fp.peak_sample_bytes <= 2.7 * KIB
    assert 320 * fp.peak_sample_bytes <= target.l1.data_bytes
    r = ok(simulate(deepfm, guide_plan("deepfm", deepfm), target))
    assert r.peak_l1_bytes <= target.l1.data_bytes


# ---- ResNet-50 ----------------------------------------------------------------------------------
def test_resnet50_stage_sizes(resnet50: Graph) -> None:
    conv1 = next(op for op in resnet50.ops if op.op_type == "nn.conv2d")
    assert sample_bytes(resnet50, conv1.output)[0] == 1568 * KIB  # 112x112x64
    adds = residual_adds(resnet50)
    assert len(adds) == 16
    stage_ends = [adds[2], adds[6], adds[12], adds[15]]  # ends of conv2_x .. conv5_x
    sizes = [sample_bytes(resnet50, resnet50.ops[i].output)[0] // KIB for i in stage_ends]
    assert sizes == [1568, 784, 392, 196]
    # "max occupancy" of conv2_x: output + residual
    assert 2 * sizes[0] == 3136
    # the first (downsampling) block of conv3_x..conv5_x: block input + block output,
    # 2352 / 1176 / 588 KiB in the guide's table, is exactly the block's footprint
    for first, guide in ((3, 2352), (7, 1176), (13, 588)):
        block = range(adds[first - 1] + 1, adds[first] + 1)
        assert group_footprint(resnet50, block).peak_sample_bytes == guide * KIB
    # later blocks never need more than the guide's "output + residual"
    for i, guide in ((1, 3136), (4, 1568), (8, 784), (14, 392)):
        block = range(adds[i - 1] + 1, adds[i] + 1)
        assert group_footprint(resnet50, block).peak_sample_bytes <= guide * KIB


def test_primitive_port_equals_the_reconstruction(resnet50: Graph) -> None:
    """compiler.guide_plans.resnet50_schedule (primitives) builds exactly the guide's plan."""
    from compiler.guide_plans import guide_plan

    ported, rebuilt = guide_plan("resnet50", resnet50), resnet_guide_plan(resnet50)
    assert ported.groups == rebuilt.groups
    assert ported.transfers == rebuilt.transfers
    assert ported.order == rebuilt.order


def test_resnet50_guide_plan_is_valid_and_calibrated(resnet50: Graph, target: Target) -> None:
    from compiler.guide_plans import guide_plan

    r = ok(simulate(resnet50, guide_plan("resnet50", resnet50), target))
    assert r.peak_l1_bytes <= 784 * KIB  # 3136 KiB per image over 4 cores, and so on
    assert r.peak_llb_bytes <= target.llb.bytes
    assert r.chip_throughput_per_s == pytest.approx(BYTEMLPERF_RESNET50_FP16, rel=0.15)
    assert r.latency_over_bound > 1


def test_resnet50_plan_closing_groups_before_the_downsampling_blocks_overflows(
    resnet50: Graph, target: Target
) -> None:
    # Groups ending at the 3rd/7th/13th residual add put each stage's downsampling block
    # (2352 KiB per image for conv3_x, by the guide's own table) into a group that gives an
    # image only 2 cores: 1176 KiB per core.
    err = simulate(resnet50, resnet_guide_plan(resnet50, ends=(3, 7, 13)), target)
    assert isinstance(err, SimError) and err.status == "capacity"
    assert err.step == "group_1[0]" and err.resource.startswith("L1 of core")
    # plus the double-buffered tiles of the input it streams from the LLB, and (issue 25)
    # the halo of the block's 3x3 conv at the cut between an image's two cores: one
    # input row from the other core, 28 x 128 x 2 = 7,168 B
    assert err.needed_bytes == 2352 * KIB // 2 + 2 * STREAM_TILE_ELEMENTS * 2 + 28 * 128 * 2


# ---- automatic levels ------------------------------------------------------------------------------
@pytest.mark.parametrize("model", ["resnet50", "bert128"])
def test_levels_get_faster(model: str, request: pytest.FixtureRequest, target: Target) -> None:
    graph: Graph = request.getfixturevalue(model)
    results = [simulate(graph, graph_schedule_level(graph, target, lvl), target, timeline=False)
               for lvl in range(4)]
    tp = [ok(r).chip_throughput_per_s for r in results]
    assert tp[0] < tp[1] < tp[2] <= tp[3]


@pytest.mark.parametrize(("model", "plan_name"), [("resnet50", "resnet50"), ("bert128", "bert_base")])
def test_o3_is_close_to_the_hand_written_plan(
    model: str, plan_name: str, request: pytest.FixtureRequest, target: Target
) -> None:
    """The automatic O3 is within 10% of (or beats) the guide's hand-written plan."""
    from compiler.guide_plans import guide_plan

    graph: Graph = request.getfixturevalue(model)
    auto = ok(simulate(graph, graph_schedule_level(graph, target, 3), target, timeline=False))
    hand = ok(simulate(graph, guide_plan(plan_name, graph), target, timeline=False))
    assert auto.chip_throughput_per_s >= 0.9 * hand.chip_throughput_per_s
