"""The report's timeline (issue 21): a legend naming each group's colour and the
transfers' grey, and a line where each chunk after a group's first starts on each core.

Before this, chunks of one group were drawn back to back in one colour with no edge
(a group split in four read as one bar) and the page had no legend.
"""

from __future__ import annotations

import warnings

import onnx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from autotune.report._timeline import BOUNDARY_GID, COLOURS, chunk_of, timeline_figure
from compiler import zoo
from compiler.graph import Graph
from compiler.model import Model
from compiler.schedule import GroupSpec, Placement, make_schedule
from compiler.target import Target
from sim import SimResult, simulate


def _graph(proto: onnx.ModelProto, name: str) -> Graph:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Model(proto, name=name).graph


@pytest.fixture(scope="module")
def split_result() -> SimResult:
    """tiny_cnn at batch 8 in two groups, split in 4 and 2 chunks on two core halves
    (the automatic levels split nothing this small): split/concat transfers between."""
    graph = _graph(zoo.build("tiny_cnn", batch=8, weights="inputs"), "tiny")
    halves = [[0, 1, 2, 3], [4, 5, 6, 7]]
    groups = [GroupSpec("a", tuple(range(8)), 4, (Placement.make("DDR", halves),) * 4),
              GroupSpec("b", tuple(range(8, len(graph.ops))), 2,
                        (Placement.make("DDR", halves),) * 2)]
    target = Target.default()
    r = simulate(graph, make_schedule(graph, groups), target)
    assert isinstance(r, SimResult), r
    return r


def _labels(fig: object) -> list[str]:
    legend = fig.axes[0].get_legend()  # type: ignore[attr-defined]
    assert legend is not None, "the timeline has no legend"
    return [t.get_text() for t in legend.get_texts()]


def test_legend_names_every_group_and_the_transfers(split_result: SimResult) -> None:
    r = split_result
    names = list(dict.fromkeys(chunk_of(s.name)[0] for s in r.steps if s.kind == "group"))
    assert 1 < len(names) <= COLOURS
    labels = _labels(timeline_figure(r))
    assert labels[:len(names)] == names
    has_transfers = any(s.kind != "group" for s in r.steps)
    assert ("split/concat transfers" in labels) == has_transfers


def test_chunk_boundaries_are_drawn_where_each_later_chunk_starts(split_result: SimResult) -> None:
    r = split_result
    to_us = 1e6 / r.clock_hz
    cores = sorted({c for s in r.steps for c in s.cores})
    want = sorted((round(s.start_cycles * to_us, 9), cores.index(c))
                  for s in r.steps if s.kind == "group" and chunk_of(s.name)[1]
                  for c in s.cores)
    assert want, "the fixture must have a group in several chunks"
    fig = timeline_figure(r)
    found = [c for c in fig.axes[0].collections if c.get_gid() == BOUNDARY_GID]
    assert len(found) == 1, "no chunk boundaries drawn"
    got = sorted((round(float(seg[0][0]), 9), round(float(seg[0][1] + seg[1][1]) / 2))
                 for seg in found[0].get_segments())
    assert got == want
    assert f"chunk boundary ({len(want)})" in _labels(fig)


def test_groups_beyond_the_palette_share_a_legend_entry(split_result: SimResult) -> None:
    from dataclasses import replace

    r = split_result
    first = next(s for s in r.steps if s.kind == "group")
    many = tuple(replace(first, name=f"g{i}[0]") for i in range(COLOURS + 5))
    labels = _labels(timeline_figure(replace(r, steps=many)))
    assert len(labels) == COLOURS  # no transfer, no later chunk
    assert labels[0] == "g0, g20" and labels[5] == "g5"


def test_no_group_step_no_figure(split_result: SimResult) -> None:
    from dataclasses import replace

    assert timeline_figure(replace(split_result, steps=())) is None


@given(st.text(min_size=1, max_size=12).filter(lambda s: "[" not in s),
       st.integers(min_value=0, max_value=10_000))
def test_chunk_of_inverts_the_step_name(name: str, chunk: int) -> None:
    assert chunk_of(f"{name}[{chunk}]") == (name, chunk)
    assert chunk_of(name) == (name, None)
