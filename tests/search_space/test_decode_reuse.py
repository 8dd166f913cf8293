"""What decoding now reuses instead of recomputing (issue 20), against what it replaced.

* The capacity repair (``decode_fitted``) walks the scopes of one Decoding again instead
  of decoding from scratch each round, and builds only the schedule it returns: compared
  with the full re-decodes it replaced (written out here as the reference), on targets
  whose L1 or LLB is small enough that most vectors need repair rounds, with the
  compiled core and with the Python decoder.
* The compiled walk reads a group's working-set table when an entry is first needed, so
  the chunks of a group share what the filler computed.
* Transfers are equal values on shared placements: decoding a vector again gives equal
  transfers whose placements are the same objects (the transfers themselves are made
  anew: interning them answered 1-3 % of a decode's transfers, issue 20, h79).
* One footprint walk serves ``group_profile`` and ``chain_points`` of a key.
"""

from __future__ import annotations

import numpy as np
import pytest

from compiler.capacity import check_capacity, in_compute_dtype
from compiler.derive import Node
from compiler.footprint import _analysis, _profile, chain_points, group_profile, streamable_inputs
from compiler.graph import Graph
from compiler.key_text import key_text
from compiler.schedule import GraphSchedule
from compiler.target import Target
from search_space import _ccore, _cplan, build_space
from search_space._build import (
    _L1_NEXT,
    _LLB_NEXT,
    _X_L1_NEXT,
    _X_LLB_NEXT,
    Reader,
    SpaceLike,
    decode_fitted,
    decode_with,
)
from tests.search_space.conftest import small_graph

compiled = pytest.mark.skipif(not _ccore.available(), reason="the compiled search core is not built")


def _reference_fitted(space: SpaceLike, get: Reader, max_rounds: int) -> GraphSchedule:
    """decode_fitted as it was: a full decode per repair round, every schedule built."""
    overrides: dict[int, int] = {}
    first, scope_dim = decode_with(space, get)
    schedule = first
    graph = space.graph_for(schedule.batch)
    dims = space.dims
    for _ in range(max_rounds):
        issue = check_capacity(graph, schedule, space.target)
        if issue is None:
            return schedule
        llb = issue.core < 0
        cands = [i for i, _ in sorted(issue.live_steps, key=lambda x: -x[1])]
        cands.append(issue.step_index)
        changed = False
        for i in cands:
            st = schedule.order[i]
            node: Node = ("g", st.name, st.chunk) if st.kind == "group" else ("t", st.name, 0)
            d = scope_dim.get(node)
            if d is None:
                continue
            f = int(space.rep[d])
            choices = dims[d].choices
            cur = choices[overrides.get(f, get(d))]
            table = (_LLB_NEXT if llb else _L1_NEXT) if dims[d].kind == "scope" \
                else (_X_LLB_NEXT if llb else _X_L1_NEXT)
            nxt = table.get(cur)
            if nxt is None:
                continue
            overrides[f] = choices.index(nxt)
            changed = True
            break
        if not changed:
            break
        schedule, scope_dim = decode_with(space, get, overrides)
    if check_capacity(graph, schedule, space.target) is None:
        return schedule
    return first


@pytest.mark.parametrize("pure", [False, True])
@pytest.mark.parametrize(("key", "l1_share", "llb_share"), [("tiny_cnn", 0.02, 1.0),
                                                              ("bert2", 0.3, 1.0),
                                                              ("bert2", 1.0, 0.02)])
def test_repair_rounds_decide_as_full_redecodes(key: str, l1_share: float, llb_share: float,
                                                pure: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if pure:
        monkeypatch.setenv("GRAPHTUNE_PURE_PYTHON", "1")
    elif not _ccore.available():
        pytest.skip("the compiled search core is not built")
    t = Target.default()
    t = t.replace(l1={"data_bytes": int(t.l1.data_bytes * l1_share)},
                  llb={"bytes": int(t.llb.bytes * llb_share)})
    space = build_space(small_graph(key), t)
    rng = np.random.default_rng(31)
    repaired = 0
    for v in space.sample_vectors(rng, 20):
        values = v[space.rep].tolist()

        def get(d: int, values: list[int] = values) -> int:
            return values[d]

        a = decode_fitted(space, get, space.options.repair_rounds)
        b = _reference_fitted(space, get, space.options.repair_rounds)
        assert key_text(a) == key_text(b)
        graph = space.graph_for(a.batch)
        issue_a, issue_b = check_capacity(graph, a, t), check_capacity(graph, b, t)
        assert issue_a == issue_b
        first = decode_with(space, get)[0]
        repaired += check_capacity(graph, first, t) is not None
    assert repaired >= 5  # the repair rounds ran


@compiled
def test_chunks_share_the_working_set_table() -> None:
    """Two chunk steps of one group with one table: each entry is computed once."""
    from search_space import _cwalk  # type: ignore[attr-defined]

    asked: list[int] = []
    table: list[float | None] = [None] * 4

    def fill(i: int) -> float:
        asked.append(i)
        table[i] = 100.0 + i
        return 100.0 + i

    def chunk(first: int, core: int) -> tuple[object, ...]:
        return (0, 0, 7, 2, 0, [], ((first, 1, ((core,),)),), 4, 0, (), table, True, fill, 0.0)

    out = _cwalk.walk(1e6, 1e7, 8, [chunk(0, 0), chunk(1, 1)], True)
    assert out is not None and list(out[0]) == [0, 0]  # both in L1
    assert sorted(asked) == sorted(set(asked)) and asked  # no entry asked for twice
    # a table filled before the walk (by an earlier decode) is read, not recomputed
    asked.clear()
    _cwalk.walk(1e6, 1e7, 8, [chunk(0, 0), chunk(1, 1)], True)
    assert asked == []


@compiled
def test_transfers_are_equal_values_on_shared_placements(target: Target) -> None:
    space = build_space(small_graph("tiny_cnn"), target)
    v = space.sample_vectors(np.random.default_rng(5), 1)[0]
    a, b = space.decode(v), space.decode(v.copy())
    assert a is not b and a.transfers
    assert a.transfers == b.transfers
    assert all(x.placement is y.placement for x, y in zip(a.transfers, b.transfers, strict=True))
    assert key_text(a) == key_text(b)


def test_one_footprint_walk_serves_profile_and_points(target: Target) -> None:
    """group_profile and chain_points agree with a fresh walk, whichever is asked first."""
    graph = in_compute_dtype(small_graph("bert2"), target)
    n = len(graph.ops)
    for k, ops in enumerate([tuple(range(a, min(a + w, n))) for a in range(0, n, 7) for w in (3, 9)]):
        streams = streamable_inputs(graph, ops)
        for streamed in (frozenset(), streams):
            for off in (False, True):
                for held in (False, True):
                    want = _profile(graph, _analysis(graph, ops), streamed & streams, off, held)
                    if k % 2:
                        pts, prof = chain_points(graph, ops, streamed, off, held), \
                            group_profile(graph, ops, streamed, off, held)
                    else:
                        prof, pts = group_profile(graph, ops, streamed, off, held), \
                            chain_points(graph, ops, streamed, off, held)
                    assert prof == want[0]
                    assert pts == want[4]



def _reference_work(graph: Graph, ops: tuple[int, ...], streamed: frozenset[str], off: bool,
                    held: bool, samples: int, cores: int) -> float:
    """compiler.capacity._work as it was (every shape-independent part recomputed)."""
    from compiler.capacity import (
        STREAM_TILE_ELEMENTS,
        _facts,
        attention_excess_bytes,
        cut_sides,
        halo_bytes_per_core,
    )
    from compiler.footprint import peak_of, stream_readers
    from compiler.opshape import OpKind, op_shapes
    from compiler.views import view_sources

    f = _facts(graph, ops)
    streamed = streamed & f.streamable
    work = float(peak_of(group_profile(graph, ops, streamed, off, held), samples, cores))
    if (f.windowed and cut_sides(samples, cores)) or (f.attention and cores > 1):
        shapes = op_shapes(graph)
        roots = view_sources(graph, ops)
        for s, fx, chain in chain_points(graph, ops, streamed, off, held):
            halo = attn = 0.0
            for i in chain:
                d = shapes[i]
                if d.halo_bytes and roots.get(graph.ops[i].inputs[0],
                                              graph.ops[i].inputs[0]) not in streamed:
                    halo += halo_bytes_per_core(d, samples, cores)
                if d.kind == OpKind.BATCHED_MATMUL and d.batched:
                    attn += attention_excess_bytes(d, samples, cores, graph.float_bytes)
            if halo or attn:
                work = max(work, -(-s * samples // cores) + fx + halo + attn)
    tile = STREAM_TILE_ELEMENTS * graph.float_bytes
    readers = stream_readers(graph, ops) if streamed else {}
    buffers = 0.0
    for t in sorted(streamed):
        sb, fb = f.sizes[t]
        piece = min(tile, -(-sb * samples // cores) + fb)
        buf = 2.0 * piece
        rd = op_shapes(graph)[readers[t]] if t in readers else None
        if rd is not None and rd.window_rows > 1 and rd.in_rows:
            window = min(rd.window_rows, rd.in_rows) * (sb + fb) / rd.in_rows
            buf = max(buf, window + piece)
        buffers += buf
    if off:
        sb, fb = f.sizes[f.output]
        buffers += 2.0 * min(tile, -(-sb * samples // cores) + fb)
    return work + buffers


@pytest.mark.parametrize("key", ["tiny_cnn", "bert2"])
def test_working_sets_equal_the_direct_sums(key: str, target: Target) -> None:
    """chunk_working_set with its shape-independent parts kept (halo points, stream
    buffers) equals the sums done from scratch, bit for bit, for shapes cut inside a
    sample (halos) and spread over cores (attention)."""
    from compiler.capacity import chunk_working_set

    graph = in_compute_dtype(small_graph(key), target)
    n = len(graph.ops)
    checked = 0
    for ops in [tuple(range(a, min(a + w, n))) for a in range(0, n, 5) for w in (2, 6)]:
        streams = streamable_inputs(graph, ops)
        for streamed in (frozenset(), streams):
            for off in (False, True):
                for samples, cores in ((1, 1), (1, 2), (1, 8), (2, 3), (3, 4), (4, 8)):
                    got = chunk_working_set(graph, ops, streamed, off, False, samples, cores)
                    assert got == _reference_work(graph, ops, streamed, off, False, samples, cores)
                    checked += 1
    assert checked > 100


@compiled
@pytest.mark.parametrize(("key", "l1_share", "llb_share"), [("bert2", 0.3, 1.0), ("bert2", 1.0, 0.02),
                                                              ("tiny_cnn", 0.02, 1.0)])
def test_partial_walks_of_repair_rounds_decide_as_whole_walks(
        key: str, l1_share: float, llb_share: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled walks a repair round reads only the issue of stop at their first
    overflow (``partial``), and the plain decode is walked again in full when no repair
    fits (``walk_whole``): the schedule, its remembered plan (every step's memory, the
    peaks) and its issue equal those of whole walks throughout."""
    from compiler.capacity import plan_memory
    from search_space import _build

    t = Target.default()
    t = t.replace(l1={"data_bytes": int(t.l1.data_bytes * l1_share)},
                  llb={"bytes": int(t.llb.bytes * llb_share)})
    space = build_space(small_graph(key), t)
    rng = np.random.default_rng(32)
    wholes: list[int] = []
    whole = _build.walk_whole

    def counted(dec: object, walk: object) -> None:
        wholes.append(1)
        whole(dec, walk)  # type: ignore[arg-type]

    real = _build.scope_walk
    stopped: list[int] = []

    def seen(dec: object, get: object, cs: object, partial: bool = False) -> object:
        out = real(dec, get, cs, partial)  # type: ignore[arg-type]
        stopped.append(int(_cplan.walk_partial(dec.walk)))  # type: ignore[attr-defined]
        return out

    for v in space.sample_vectors(rng, 24):
        values = v[space.rep].tolist()

        def get(d: int, values: list[int] = values) -> int:
            return values[d]

        with monkeypatch.context() as m:
            m.setattr(_build, "walk_whole", counted)
            m.setattr(_build, "scope_walk", seen)
            a = decode_fitted(space, get, space.options.repair_rounds)
        with monkeypatch.context() as m:  # whole walks only
            m.setattr(_build, "scope_walk", lambda dec, get, cs, partial=False: real(dec, get, cs))
            b = decode_fitted(space, get, space.options.repair_rounds)
        assert key_text(a) == key_text(b)
        graph = space.graph_for(a.batch)
        pa, pb = plan_memory(graph, a, t), plan_memory(graph, b, t)
        assert pa.issue == pb.issue
        assert pa.peak_l1_bytes_per_core == pb.peak_l1_bytes_per_core
        assert pa.peak_llb_bytes == pb.peak_llb_bytes
        assert [(s.l1_bytes, s.streamed, s.held) for s in pa.steps] == \
            [(s.l1_bytes, s.streamed, s.held) for s in pb.steps]
    assert sum(stopped) >= 3 and len(wholes) >= 1, (sum(stopped), len(wholes))  # both paths ran
