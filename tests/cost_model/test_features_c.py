"""The featuriser's op-set facts from the compiled search core (``search_space._canalyse``'s
analysis, ``search_space._cwalk.profile``'s walk) give the same feature rows, bit for bit,
as the Python definitions (``GRAPHTUNE_PURE_PYTHON=1``: the reference).

Differential: fresh featurisers, one compiled and one pure, over random samples, mutated
children and crossovers of several zoo models and two torch fixtures; the rows' bytes
must match and the compiled one must have taken the C path. Property (hypothesis): the
op-set facts and working sets of random op sets of a graph (ranges, ranges with
holes, any subsets), compiled against pure, the compiled one from C.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from compiler.graph import Graph
from compiler.model import load_onnx
from compiler.target import Target
from cost_model._features import _Featuriser, _featuriser
from search_space import _ccore, build_space
from tests.search_space.conftest import small_graph

pytestmark = pytest.mark.skipif(
    not _ccore.available(),
    reason="the compiled search core is not built (no C compiler) or GRAPHTUNE_PURE_PYTHON is set")

_TORCH = Path(__file__).resolve().parents[1] / "data" / "torch"


def _graph(name: str) -> Graph:
    if name.startswith("torch:"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return load_onnx(_TORCH / f"{name[6:]}.onnx").graph
    return small_graph(name)


def _schedules(graph: Graph, target: Target, count: int, seed: int) -> list:  # type: ignore[type-arg]
    space = build_space(graph, target)
    rng = np.random.default_rng(seed)
    samples = [space.sample(rng) for _ in range(count)]
    children = [space.mutate(samples[int(rng.integers(count))], rng) for _ in range(count)]
    crossed = [space.crossover(samples[int(rng.integers(count))],
                               children[int(rng.integers(count))], rng) for _ in range(count // 2)]
    return samples + children + crossed


def _pure(monkeypatch: pytest.MonkeyPatch, on: bool) -> None:
    if on:
        monkeypatch.setenv("GRAPHTUNE_PURE_PYTHON", "1")
    else:
        monkeypatch.delenv("GRAPHTUNE_PURE_PYTHON", raising=False)


@pytest.mark.parametrize("name,count", [("tiny_cnn", 40), ("bert2", 20), ("deepfm", 30),
                                        ("wide_and_deep", 30), ("torch:resnet18_b16", 12),
                                        ("torch:gpt_b16", 12)])
def test_features_compiled_equal_pure(name: str, count: int, target: Target,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    graph = _graph(name)
    schedules = _schedules(graph, target, count, 11)
    fast = _Featuriser(graph, target)
    got = fast.run(schedules)
    assert fast.os_pack, "the compiled featuriser did not take the C path"
    _pure(monkeypatch, True)
    ref = _Featuriser(graph, target)
    want = ref.run(schedules)
    assert not ref.os_pack
    assert got.tobytes() == want.tobytes()


def test_pure_set_at_run_time_reaches_the_graphs_featuriser(
        target: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    """``GRAPHTUNE_PURE_PYTHON=1`` set after a compiled featuriser was remembered on the
    graph (``bench/tune_workers.py --decoders`` runs both jobs on one graph object) gives a
    pure featuriser, not the one holding facts from C; unset again, the compiled one."""
    graph = small_graph("tiny_cnn")
    schedules = _schedules(graph, target, 12, 3)
    _pure(monkeypatch, False)
    fast = _featuriser(graph, target)
    got = fast.run(schedules)
    assert fast.os_pack
    _pure(monkeypatch, True)
    ref = _featuriser(graph, target)
    assert ref is not fast
    want = ref.run(schedules)
    assert not ref.os_pack
    assert got.tobytes() == want.tobytes()
    _pure(monkeypatch, False)
    assert _featuriser(graph, target) is fast


_RANGES = {"bert2": small_graph("bert2"), "tiny_cnn": small_graph("tiny_cnn")}


def _op_sets(n: int) -> st.SearchStrategy[tuple[int, ...]]:
    """Ascending op sets of a graph of ``n`` ops: ranges, ranges with holes, any subsets."""
    ranges = st.tuples(st.integers(0, n - 1), st.integers(1, 24)).map(
        lambda r: tuple(range(r[0], min(n, r[0] + r[1]))))
    holes = st.tuples(ranges, st.sets(st.integers(0, 23))).map(
        lambda r: tuple(op for k, op in enumerate(r[0]) if k not in r[1]) or r[0])
    subsets = st.sets(st.integers(0, n - 1), min_size=1, max_size=12).map(
        lambda s: tuple(sorted(s)))
    return st.one_of(ranges, holes, subsets)


@settings(max_examples=80, deadline=None)
@given(st.data(), st.sampled_from(sorted(_RANGES)), st.sampled_from([1, 2, 4, 8]),
       st.sampled_from([1, 2, 4]))
def test_op_set_facts_compiled_equal_pure(data: st.DataObject, name: str, samples: int,
                                          cores: int) -> None:
    import os

    graph = _RANGES[name]
    target = Target.default()
    ops = data.draw(_op_sets(len(graph.ops)), label="ops")
    facts: list[Any] = []
    for pure in (False, True):
        old = os.environ.pop("GRAPHTUNE_PURE_PYTHON", None)
        if pure:
            os.environ["GRAPHTUNE_PURE_PYTHON"] = "1"
        try:
            f = _Featuriser(graph, target)
            try:
                info = f.opset(ops)
            except IndexError:  # no output: both definitions refuse
                facts.append("no output")
                continue
            facts.append((info.inputs, info.out, info.edges, info.out_sample, info.out_fixed,
                          f.working_set(info.ident, samples, cores),
                          info.ident in f.os_pack))
        finally:
            os.environ.pop("GRAPHTUNE_PURE_PYTHON", None)
            if old is not None:
                os.environ["GRAPHTUNE_PURE_PYTHON"] = old
    event("no output" if facts[0] == "no output" else "facts")
    if facts[0] == "no output":
        assert facts[1] == "no output"
        return
    assert facts[0][:-1] == facts[1][:-1]
    # the compiled featuriser took the op set's facts and working set from C; pure did not
    assert facts[0][-1], f"{ops}: the compiled featuriser did not take the C path"
    assert not facts[1][-1]


_HOSTILE = '''
import sys
sys.path.insert(0, ".")
from compiler.target import Target
from cost_model._features import _Featuriser, _featuriser
from tests.search_space.conftest import small_graph
g = small_graph("tiny_cnn")
n = len(g.ops)
for ops in [(), (0, 10**6), (-5, 0), (-1,), (0, 1, 2**40), (n,), (n - 1, n), (0, 2**70),
            (3, 2, 1), (1, 1, 2)]:
    f = _Featuriser(g, Target.default())
    try:
        info = f.opset(ops)
        out = (info.inputs, info.out, info.edges, f.working_set(info.ident, 4, 2))
    except Exception as e:
        out = type(e).__name__
    print(ops, out)
'''


def test_hostile_op_sets_behave_as_the_reference() -> None:
    """Op sets no valid schedule has (out of range, negative, huge, unsorted, empty): the
    compiled featuriser neither crashes (a child process) nor differs from the pure one
    (same facts or the same exception)."""
    import os

    from tests.search_space._child import run_child

    outs = []
    for pure in ("0", "1"):
        old = os.environ.get("GRAPHTUNE_PURE_PYTHON")
        os.environ["GRAPHTUNE_PURE_PYTHON"] = pure
        try:
            res = run_child(_HOSTILE)
        finally:
            if old is None:
                os.environ.pop("GRAPHTUNE_PURE_PYTHON")
            else:
                os.environ["GRAPHTUNE_PURE_PYTHON"] = old
        assert res.returncode == 0, res.stderr[-2000:]
        outs.append(res.stdout)
    assert outs[0] == outs[1]
    assert outs[0].count("\n") == 10
