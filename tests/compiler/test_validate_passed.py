"""Validation remembers the groups and transfer placements that passed (issue 20), per graph
and target, by the object itself: never a verdict for another object or another target."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import onnx
import pytest

from compiler import ScheduleError, Target, load_onnx, zoo
from compiler import _validate as V
from compiler.graph import Graph
from compiler.memo import memo_of
from compiler.schedule import GraphSchedule, GroupSpec, Placement, make_schedule

ALL = (tuple(range(8)),)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Graph:
    path = tmp_path_factory.mktemp("m") / "tiny.onnx"
    onnx.save(zoo.build("tiny_cnn", batch=4, weights="inputs", image_size=16), str(path))
    return load_onnx(path).graph


def _two_groups(g: Graph, bind: tuple[tuple[int, ...], ...] = ALL) -> object:
    cut = g.op_by_name["max_pool2d_0"].index
    a = GroupSpec("A", tuple(range(cut + 1)), 2, (Placement("L1", bind),) * 2)
    b = GroupSpec("B", tuple(range(cut + 1, len(g.ops))), 1, (Placement("DDR", ALL),))
    return make_schedule(g, [a, b])


def test_a_passed_group_is_not_checked_again(tiny: Graph, monkeypatch: pytest.MonkeyPatch) -> None:
    target = Target.default()
    s = _two_groups(tiny)
    checked: list[str] = []
    real = V._check_group

    def counting(g: GroupSpec, graph: Graph, t: Target | None) -> None:
        checked.append(g.name)
        real(g, graph, t)

    monkeypatch.setattr(V, "_check_group", counting)
    memo_of(tiny).pop(("validated", id(target)), None)
    V.validate_schedule(s, tiny, target)  # type: ignore[arg-type]
    assert checked == ["A", "B"]
    V.validate_schedule(s, tiny, target)  # type: ignore[arg-type]
    assert checked == ["A", "B"]  # both remembered
    V.validate_schedule(s, tiny, Target.default())  # type: ignore[arg-type]
    assert checked == ["A", "B", "A", "B"]  # another target object: checked again


def test_a_failing_group_fails_every_time_beside_passed_ones(tiny: Graph) -> None:
    target = Target.default()
    good = _two_groups(tiny)
    V.validate_schedule(good, tiny, target)  # type: ignore[arg-type]
    bad = _two_groups(tiny, bind=((0, 99),))  # the same names, a core that does not exist
    for _ in range(2):
        with pytest.raises(ScheduleError, match="core 99 does not exist"):
            V.validate_schedule(bad, tiny, target)  # type: ignore[arg-type]
    # without a target a core's upper bound is not checked: what passed there must
    # still fail against the target
    bad_again = _two_groups(tiny, bind=((0, 99),))
    V.validate_schedule(bad_again, tiny, None)  # type: ignore[arg-type]
    with pytest.raises(ScheduleError, match="core 99 does not exist"):
        V.validate_schedule(bad_again, tiny, target)  # type: ignore[arg-type]
    V.validate_schedule(good, tiny, target)  # type: ignore[arg-type]


def test_remembered_verdicts_agree_with_checking_everything(tiny: Graph,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Decoded, mutated and crossed-over schedules (valid) and their copies with a transfer's
    or a chunk's binding broken (invalid): the same verdicts and messages with and without
    the memo."""
    from search_space import build_space

    target = Target.default()
    space = build_space(tiny, target, tiny.batch)
    rng = np.random.default_rng(0)
    base = [space.sample(rng) for _ in range(10)]
    cases = [*base, *(space.mutate(b, rng) for b in base), *(space.crossover(a, b, rng)
                                                             for a, b in itertools.pairwise(base))]

    bad = Placement("L1", ((0, 99),))  # a core that does not exist

    def broken(s: GraphSchedule) -> GraphSchedule:
        """``s`` with one transfer's placement (or its first group's first chunk) bad, the
        other groups and transfers the same objects."""
        if s.transfers:
            t0 = dataclasses.replace(s.transfers[0], placement=bad)
            return GraphSchedule(s.batch, s.groups, (t0, *s.transfers[1:]), s.order)
        g0 = dataclasses.replace(s.groups[0], chunks=(bad, *s.groups[0].chunks[1:]))
        return GraphSchedule(s.batch, (g0, *s.groups[1:]), s.transfers, s.order)

    def verdicts() -> list[str]:
        out = []
        for s in cases:
            for t in (GraphSchedule(s.batch, s.groups, s.transfers, s.order), broken(s)):
                try:
                    V.validate_schedule(t, tiny, target)  # type: ignore[arg-type]
                    out.append("ok")
                except ScheduleError as exc:
                    out.append(str(exc))
        return out

    memo_of(tiny).pop(("validated", id(target)), None)
    with_memo = verdicts()
    with_memo_again = verdicts()
    monkeypatch.setattr(V, "_passed", lambda graph, t: {})
    plain = verdicts()
    assert with_memo == with_memo_again == plain
    assert plain.count("ok") == len(cases)  # every decoded one valid, every broken one not
    assert all("core 99 does not exist" in v for v in plain[1::2])


def test_memo_is_bounded(tiny: Graph, monkeypatch: pytest.MonkeyPatch) -> None:
    target = Target.default()
    monkeypatch.setattr(V, "_PASSED_LIMIT", 1)
    memo_of(tiny).pop(("validated", id(target)), None)
    V.validate_schedule(_two_groups(tiny), tiny, target)  # type: ignore[arg-type]
    assert len(V._passed(tiny, target)) == 0  # over the limit: cleared on the next use
    V.validate_schedule(_two_groups(tiny), tiny, target)  # type: ignore[arg-type]
