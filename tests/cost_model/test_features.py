"""cost_model.features: documented columns, target normalisation, known values, caching."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from compiler.auto import core_bind_for
from compiler.derive import single_tensor_cuts
from compiler.graph import Graph
from compiler.schedule import GraphSchedule, GroupSpec, Placement, make_schedule
from compiler.target import Target
from cost_model import FEATURES, feature_names, features, reference_cycles
from search_space import Space, build_space

ROOT = Path(__file__).resolve().parents[2]


def col(X: np.ndarray, name: str) -> np.ndarray:
    return X[:, feature_names().index(name)]


def two_groups(graph: Graph, scope: str, bind_a: object, bind_b: object, split: int = 1
               ) -> GraphSchedule:
    """The graph cut once in the middle; group 0's result in ``scope``."""
    cuts = single_tensor_cuts(graph)
    cut = cuts[len(cuts) // 2]
    a = tuple(range(cut + 1))
    b = tuple(range(cut + 1, len(graph.ops)))
    pa, pb = Placement.make(scope, bind_a), Placement.make("DDR", bind_b)
    return make_schedule(graph, [GroupSpec("a", a, split, (pa,) * split),
                                 GroupSpec("b", b, split, (pb,) * split)])


def test_every_column_is_named_and_documented() -> None:
    names = feature_names()
    assert len(names) == len(set(names)) == len(FEATURES) >= 30
    for f in FEATURES:
        assert f.name.isidentifier() and len(f.doc) > 20, f


def test_rows_are_finite_and_fixed_length(tiny: Graph, target: Target,
                                          tiny_candidates: list[GraphSchedule]) -> None:
    X = features(tiny, tiny_candidates, target)
    assert X.shape == (len(tiny_candidates), len(FEATURES))
    assert np.all(np.isfinite(X))
    assert features(tiny, [], target).shape == (0, len(FEATURES))
    # shares are shares
    for name in ("mme_pad_waste", "l1_reuse", "act_l1_share", "act_llb_share", "act_ddr_share",
                 "interleave", "cores_per_step", "cores_per_part", "transfers_per_step"):
        v = col(X, name)
        assert np.all((v >= 0) & (v <= 1 + 1e-9)), name
    shares = col(X, "act_l1_share") + col(X, "act_llb_share") + col(X, "act_ddr_share")
    assert np.allclose(shares, 1.0)
    assert np.all(col(X, "weight_reload") >= 1 - 1e-9)
    assert np.all(col(X, "mme_cycles") >= col(X, "mme_useful_cycles"))
    assert np.all(col(X, "compute_serial") >= col(X, "compute_group_critical") - 1e-9)
    assert np.all(col(X, "compute_group_critical") >= col(X, "core_busy_max") - 1e-9)


def test_rows_do_not_depend_on_the_batch_of_candidates(tiny: Graph, target: Target,
                                                       tiny_candidates: list[GraphSchedule]) -> None:
    """Cached tables give each schedule the same row alone, in any company, in a new process."""
    X = features(tiny, tiny_candidates, target)
    for i in (0, 17, 101):
        assert np.array_equal(features(tiny, [tiny_candidates[i]], target)[0], X[i])
    rev = features(tiny, tiny_candidates[::-1], target)
    assert np.array_equal(rev[::-1], X)
    fresh = [GraphSchedule.loads(s.dumps()) for s in tiny_candidates[:20]]
    assert np.array_equal(features(tiny, fresh, target), X[:20])


def test_scaling_every_rate_leaves_the_features_unchanged(tiny: Graph, target: Target,
                                                          tiny_candidates: list[GraphSchedule]
                                                          ) -> None:
    """Normalised by the target: a chip twice as fast everywhere gives the same rows, so a model
    trained on one target ranks on another. (Fixed overheads in cycles do not scale: zeroed.)"""
    base = target.replace(matrix={"instr_overhead_cycles": 0}, dma={"setup_cycles": 0},
                          ddr={"latency_cycles": 0})
    fast = base.replace(
        matrix={"macs_per_cycle": 2 * base.matrix.macs_per_cycle},
        vector={"lanes": 2 * base.vector.lanes},
        l1={"bytes_per_cycle": 2 * base.l1.bytes_per_cycle},
        llb={"bytes_per_cycle": 2 * base.llb.bytes_per_cycle},
        ddr={"bytes_per_cycle": 2 * base.ddr.bytes_per_cycle},
        dma={"core_bytes_per_cycle": 2 * base.dma.core_bytes_per_cycle},
        noc={"link_bytes_per_cycle": 2 * base.noc.link_bytes_per_cycle},
    )
    a = features(tiny, tiny_candidates[:40], base)
    b = features(tiny, tiny_candidates[:40], fast)
    assert np.allclose(a, b, rtol=1e-9, atol=1e-12)
    assert reference_cycles(tiny, fast) == pytest.approx(reference_cycles(tiny, base) / 2)


def test_capacity_columns_scale_with_the_capacity(tiny: Graph, target: Target,
                                                  tiny_candidates: list[GraphSchedule]) -> None:
    big = target.replace(l1={"data_bytes": 2 * target.l1.data_bytes},
                         llb={"bytes": 2 * target.llb.bytes})
    a = features(tiny, tiny_candidates[:30], target)
    b = features(tiny, tiny_candidates[:30], big)
    for name in ("ws_peak_l1", "l1_peak_est", "llb_peak_est"):
        assert np.allclose(col(b, name), col(a, name) / 2), name


def test_known_values_one_group_in_ddr(tiny: Graph, target: Target) -> None:
    n = target.chip.cores_per_cluster
    one = make_schedule(tiny, [GroupSpec("all", tuple(range(len(tiny.ops))), 1,
                                     (Placement("DDR", core_bind_for(tiny.batch, n)),))])
    four = make_schedule(tiny, [GroupSpec("all", tuple(range(len(tiny.ops))), 4,
                                      (Placement("DDR", core_bind_for(2, n)),) * 4)])
    X = features(tiny, [one, four], target)
    assert col(X, "groups_per_op")[0] == pytest.approx(1 / len(tiny.ops))
    assert col(X, "weight_reload") == pytest.approx([1.0, 4.0])  # weights reloaded per chunk
    assert col(X, "act_ddr_share") == pytest.approx([1.0, 1.0])
    assert col(X, "chunks_max_log2") == pytest.approx([0.0, 2.0])
    assert col(X, "cores_per_step") == pytest.approx([1.0, 1.0])
    assert col(X, "noc_cycles") == pytest.approx([0.0, 0.0])
    assert col(X, "l1_reuse") == pytest.approx([0.0, 0.0])


def test_l1_results_stay_on_their_cores_or_cross_the_noc(tiny: Graph, target: Target) -> None:
    same = two_groups(tiny, "L1", [0, 1, 2, 3], [0, 1, 2, 3], split=2)
    moved = two_groups(tiny, "L1", [0, 1, 2, 3], [4, 5, 6, 7], split=2)
    via_llb = two_groups(tiny, "LLB", [0, 1, 2, 3], [0, 1, 2, 3], split=2)
    X = features(tiny, [same, moved, via_llb], target)
    assert col(X, "noc_cycles")[0] == 0 and col(X, "l1_reuse")[0] > 0
    assert col(X, "noc_cycles")[1] > 0 and col(X, "l1_reuse")[1] == 0
    assert col(X, "noc_hops")[1] >= 1
    assert col(X, "llb_cycles")[2] > col(X, "llb_cycles")[0]
    assert col(X, "act_llb_share")[2] > 0


def test_space_encoding_columns(tiny: Graph, target: Target, tiny_space: Space,
                                tiny_candidates: list[GraphSchedule]) -> None:
    X = features(tiny, tiny_candidates, target, space=tiny_space)
    names = feature_names(tiny_space)
    assert X.shape == (len(tiny_candidates), len(names)) == (len(tiny_candidates),
                                                               len(FEATURES) + tiny_space.dimension)
    assert names[len(FEATURES)].startswith("space.") and len(set(names)) == len(names)
    assert np.array_equal(X[:, :len(FEATURES)], features(tiny, tiny_candidates, target))
    assert np.array_equal(X[:, len(FEATURES):], tiny_space.encode_many(tiny_candidates))


def test_cost_model_never_imports_sim() -> None:
    code = ("import sys, cost_model; import numpy; "
            "bad = [m for m in sys.modules if m == 'sim' or m.startswith('sim.')]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT,
                   env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    for path in (ROOT / "cost_model").rglob("*.py"):
        text = path.read_text()
        assert "import sim" not in text and "from sim" not in text, path


def test_vectorised_groups_equal_the_chunk_by_chunk_path(tiny: Graph, target: Target,
                                                         tiny_candidates: list[GraphSchedule]
                                                         ) -> None:
    """New groups are computed together, vectorised over their chunks; the chunk-by-chunk
    path (kept for core parts of unequal sizes) gives the same rows."""
    from cost_model._features import _Featuriser

    uneven = two_groups(tiny, "L1", [[0, 1, 2], [3]], [[4, 5], [6, 7]])
    mixed = [*tiny_candidates[:60], uneven, *two_groups_variants(tiny)]
    fast = _Featuriser(tiny, target).run(mixed)
    slow = _Featuriser(tiny, target, vectorised=False).run(mixed)
    assert np.allclose(fast, slow, rtol=1e-12, atol=1e-15)
    assert np.array_equal(features(tiny, mixed, target), fast)


def two_groups_variants(graph: Graph) -> list[GraphSchedule]:
    return [two_groups(graph, scope, a, b, split)
            for scope in ("L1", "LLB", "DDR")
            for a, b in (([0, 1, 2, 3], [0, 1, 2, 3]), ([[0, 1], [2, 3]], [4, 5, 6, 7]))
            for split in (1, 2)]


@pytest.mark.parametrize("name,batch,kw", [("tiny_cnn", 8, {}), ("mobilenet_v2", 8, {}),
                                           ("bert_base", 4, {"num_layers": 2, "seq": 64}),
                                           ("deepfm", 2560, {})])
def test_schedules_with_codes_give_the_object_walks_rows(name: str, batch: int,
                                                         kw: dict[str, int],
                                                         target: Target) -> None:
    """Schedules a space decoded carry codes (compiler.codes) and are gathered with numpy;
    the same schedules without codes walk their objects, and the reference path
    (vectorised=False) computes every group chunk by chunk: all give the same rows, alone
    or mixed with hand-built schedules and another space's."""
    from compiler.codes import codes_of
    from cost_model._features import _Featuriser
    from tests.sim.conftest import zoo_graph

    graph = zoo_graph(name, batch, **kw)
    space = build_space(graph, target)
    rng = np.random.default_rng(3)
    uniform = [space.sample(rng) for _ in range(16)]
    mutants = []
    for _ in range(16):
        s = uniform[int(rng.integers(4))]
        for _ in range(int(rng.integers(1, 4))):
            s = space.mutate(s, rng)
        mutants.append(s)
    coded = uniform + mutants
    assert all(codes_of(s) is not None for s in coded)
    plain = [GraphSchedule.loads(s.dumps()) for s in coded]  # the same values, no codes
    assert not any(codes_of(s) is not None for s in plain)
    fast = _Featuriser(graph, target).run(coded)
    assert np.array_equal(_Featuriser(graph, target).run(plain), fast)
    slow = _Featuriser(graph, target, vectorised=False).run(coded)
    assert np.allclose(slow, fast, rtol=1e-12, atol=1e-15)
    # mixed: hand-built schedules, schedules of another space (another value table), repeats
    other = build_space(graph, target)
    theirs = [other.sample(np.random.default_rng(5)) for _ in range(4)]
    hand = [make_schedule(graph, [GroupSpec(
        "all", tuple(range(len(graph.ops))), 1,
        (Placement("DDR", core_bind_for(graph.batch, target.chip.cores_per_cluster)),))])]
    if name == "tiny_cnn":
        hand += two_groups_variants(graph)
    mixed = [*hand, *coded[::3], *theirs, *plain[1::3], *coded[:2]]
    f = _Featuriser(graph, target)
    X = f.run(mixed)
    alone = np.vstack([_Featuriser(graph, target).run([s]) for s in mixed])
    assert np.array_equal(X, alone)
    assert np.allclose(_Featuriser(graph, target, vectorised=False).run(mixed), X,
                       rtol=1e-12, atol=1e-15)
    assert np.array_equal(f.run(mixed[::-1]), X[::-1])  # warm tables
