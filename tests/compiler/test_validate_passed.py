"""Validation remembers the groups and transfer placements that passed (issue 20), per graph
and target, by the object itself: never a verdict for another object or another target."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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


def test_a_partition_met_before_is_not_walked_again(tiny: Graph,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The groups' names and op tuples (by identity) stand for the partition's checks: other
    placements of the same op tuples are not walked again, equal but new tuples are."""
    target = Target.default()
    walked: list[int] = []
    real = V._check_partition

    def counting(s: GraphSchedule, graph: Graph) -> None:
        walked.append(len(s.groups))
        real(s, graph)

    monkeypatch.setattr(V, "_check_partition", counting)
    memo_of(tiny).pop(("validated", id(target)), None)
    s = _two_groups(tiny)
    V.validate_schedule(s, tiny, target)  # type: ignore[arg-type]
    assert walked == [2]
    moved = GraphSchedule(s.batch, tuple(dataclasses.replace(g, chunks=tuple(
        Placement("DDR", c.core_bind) for c in g.chunks)) for g in s.groups), s.transfers,
        s.order)
    V.validate_schedule(moved, tiny, target)  # type: ignore[arg-type]
    assert walked == [2]  # the same op tuples: remembered
    V.validate_schedule(_two_groups(tiny), tiny, target)  # type: ignore[arg-type]
    assert walked == [2, 2]  # equal op tuples, other objects: walked


def _partition_errors(g: Graph) -> list[tuple[str, GraphSchedule]]:
    """Schedules whose partition is wrong, each with the message's start."""
    n = len(g.ops)
    cut = g.op_by_name["max_pool2d_0"].index
    one = (Placement("L1", ALL),)

    def sched(*groups: GroupSpec) -> GraphSchedule:
        return GraphSchedule(g.batch, groups, (), ())

    a, b = tuple(range(cut + 1)), tuple(range(cut + 1, n))
    return [
        ("two groups are named 'A'", sched(GroupSpec("A", a, 1, one), GroupSpec("A", b, 1, one))),
        ("group B has no ops", sched(GroupSpec("A", a + b, 1, one), GroupSpec("B", (), 1, one))),
        (f"group B: op index {n} does not exist",
         sched(GroupSpec("A", a, 1, one), GroupSpec("B", (*b, n), 1, one))),
        (f"op {g.ops[cut].name} is in two groups",
         sched(GroupSpec("A", a, 1, one), GroupSpec("B", (cut, *b), 1, one))),
        (f"op {g.ops[n - 1].name} is in no group",
         sched(GroupSpec("A", a, 1, one), GroupSpec("B", b[:-1], 1, one))),
        ("op ", sched(GroupSpec("A", (-1, *a[1:]), 1, one), GroupSpec("B", b, 1, one))),
        ("groups form a cycle", sched(GroupSpec("A", (0, *b), 1, one),
                                      GroupSpec("B", a[1:], 1, one))),
    ]


def test_a_wrong_partition_fails_every_time_with_its_message(tiny: Graph) -> None:
    target = Target.default()
    memo_of(tiny).pop(("validated", id(target)), None)
    V.validate_schedule(_two_groups(tiny), tiny, target)  # type: ignore[arg-type]
    for start, s in _partition_errors(tiny):
        for _ in range(2):
            with pytest.raises(ScheduleError) as exc:
                V.validate_schedule(s, tiny, target)  # type: ignore[arg-type]
            assert str(exc.value).startswith(start), (start, str(exc.value))


@pytest.fixture(scope="module")
def branchy() -> Graph:
    from tests.sim.test_properties import graph_of

    return graph_of("bert")  # residuals and attention: ops with several predecessors


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_group_order_agrees_with_walking_every_op(branchy: Graph, data: st.DataObject) -> None:
    """Random op sets (contiguous runs or scattered, an op now and then in two groups): the
    same order, or a cycle named the same way."""
    from compiler.derive import group_order

    n = len(branchy.ops)
    k = data.draw(st.integers(1, 8))
    scattered = data.draw(st.booleans())
    if scattered:
        owner = data.draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n))
    else:
        cuts = sorted(data.draw(st.lists(st.integers(1, n - 1), max_size=k - 1, unique=True)))
        owner = [sum(i >= c for c in cuts) for i in range(n)]
    sets = [[i for i in range(n) if owner[i] == j] for j in range(k)]
    if data.draw(st.booleans()) and len(sets) > 1 and sets[0]:
        sets[1].append(sets[0][0])  # an op in two groups: the walk over every op
    one = (Placement("L1", ALL),)
    groups = [GroupSpec(f"g{j}", tuple(sorted(set(s))), 1, one) for j, s in enumerate(sets) if s]
    try:
        want: list[str] | str = group_order(branchy, groups, every_op=True)
    except ScheduleError as exc:
        want = str(exc)
    for _ in range(2):  # the second time from the kept outside predecessors
        try:
            got: list[str] | str = group_order(branchy, groups)
        except ScheduleError as exc:
            got = str(exc)
        assert got == want


def test_an_op_set_passed_at_one_split_is_checked_at_another(tiny: Graph) -> None:
    """A group's op-set checks are remembered by its op tuple and split: the same op tuple at
    a split that does not divide the batch still fails, every time."""
    target = Target.default()
    memo_of(tiny).pop(("validated", id(target)), None)
    s = _two_groups(tiny)  # group A at split 2 (batch 4)
    V.validate_schedule(s, tiny, target)  # type: ignore[arg-type]
    a = s.groups[0]
    three = dataclasses.replace(a, split=3, chunks=(a.chunks[0],) * 3)
    assert three.ops is a.ops
    for _ in range(2):
        with pytest.raises(ScheduleError, match="split factor 3 does not divide batch 4"):
            V._check_group(three, tiny, target)
    V._check_group(a, tiny, target)
