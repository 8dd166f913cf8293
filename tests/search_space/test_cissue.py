"""A compiled walk's capacity issue names its transfers' tensors from the packed transfers.

When the compiled walk overflows, :func:`search_space._crows._issue` writes the
:class:`compiler.capacity.CapacityIssue` (the live results, each "name (tensor)"). A
transfer's tensor is read from the packed transfers
(:meth:`search_space._cderive.PackedTransfers.tensor_of`), so an overflowing candidate (a
third of BERT-large's: the capacity repair's walks) makes no ``Transfer`` values. The issue
itself is compared with the Python walk's in ``test_ccore.py``
(``test_overflows_explained_alike``); here: ``tensor_of`` is each made value's tensor, it
refuses a bad index, and an overflow leaves the transfers packed with the issue the Python
walk gives.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from compiler.target import Target
from search_space import _build, _cderive, build_space
from search_space._space import _Recorder
from tests.search_space.conftest import small_graph

pytestmark = pytest.mark.skipif(
    not _cderive.available(),
    reason="the compiled search core is not built (no C compiler) or GRAPHTUNE_PURE_PYTHON is set")


def _small_llb() -> Target:
    t = Target.default()
    return t.replace(llb={"bytes": int(t.llb.bytes * 0.2)})


def _walked(space: Any, vec: np.ndarray) -> _build.Decoding:
    """Passes 1-3 of one vector (no repair): the Decoding, its walk done."""
    rec = _Recorder(vec[space.rep].tolist(), space._rep_list)
    dec = _build.decode_groups(space, rec)
    _build.walk_scopes(dec, rec)
    return dec


def test_tensor_of_is_the_made_values_tensor() -> None:
    """``tensor_of(j)`` is ``self[j].tensor`` for every transfer, before and after the values
    are made (negative indices as a list's); an index out of range is an IndexError."""
    space = build_space(small_graph("bert2"), Target.default())
    rng = np.random.default_rng(5)
    seen = 0
    for vec in space.sample_vectors(rng, 8):
        dec = _walked(space, vec)
        tl = dec.transfers
        assert isinstance(tl, _cderive.PackedTransfers)
        n = len(tl)
        before = [tl.tensor_of(j) for j in range(-n, n)]
        assert tl._made is None  # tensor_of made nothing
        made = tl.made()
        assert before == [t.tensor for t in made] * 2
        assert [tl.tensor_of(j) for j in range(n)] == [t.tensor for t in made]
        for bad in (n, -n - 1, 10**9):
            with pytest.raises(IndexError):
                tl.tensor_of(bad)
        seen += n
    assert seen  # the decodes had transfers


def test_tensor_of_refuses_bad_indices_unmade() -> None:
    """Out of range (either sign) or not an int, before anything is made: no crash, an error."""
    space = build_space(small_graph("bert2"), Target.default())
    dec = _walked(space, space.sample_vectors(np.random.default_rng(1), 1)[0])
    tl = dec.transfers
    n = len(tl)
    for bad in (n, -n - 1, 2**40, -(2**40)):
        with pytest.raises(IndexError):
            tl.tensor_of(bad)
    with pytest.raises(TypeError):
        tl.tensor_of("0")  # type: ignore[arg-type]
    assert tl._made is None


def test_overflow_issue_leaves_transfers_packed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A walk that overflows (an LLB a fifth of the default: most of these BERT decodes, their
    issues listing split and concat results) explains it, naming transfers with their
    tensors, without making the Transfer values; the issue is the Python walk's."""
    target = _small_llb()
    c_space = build_space(small_graph("bert2"), target)
    py_space = build_space(small_graph("bert2"), target)
    rng = np.random.default_rng(11)
    named = 0
    for vec in c_space.sample_vectors(rng, 16):
        dec = _walked(c_space, vec)
        issue = dec.walk.issue
        if issue is None:
            continue
        assert isinstance(dec.transfers, _cderive.PackedTransfers)
        assert dec.transfers._made is None and dec._by_tname is None  # nothing made for it
        named += sum(1 for label, _ in issue.live if label.startswith(("split_", "concat_")))
        with monkeypatch.context() as m:
            m.setenv("GRAPHTUNE_PURE_PYTHON", "1")
            ref = _walked(py_space, vec).walk.plan().issue
        assert issue == ref
    assert named  # some issue listed a transfer (its tensor read from the packed rows)


def test_positions_and_names_made_when_read(target: Target) -> None:
    """The step rows' transfer index by name and the schedule's positions (each group's chunk
    positions, each transfer's) are made when first read, equal to what the order gives."""
    from search_space import _crows

    space = build_space(small_graph("bert2"), target)
    rng = np.random.default_rng(9)
    unread = 0
    for vec in space.sample_vectors(rng, 10):
        dec = _walked(space, vec)
        sr, at = dec._crows
        assert isinstance(at, _crows._Positions)
        unread += sr._tidx is None and at._made is None
        chunk_at: dict[str, list[int]] = {gr.name: [0] * gr.split for gr in dec.groups}
        step_at: dict[str, int] = {}
        for k, nd in enumerate(dec.nodes):  # what search_space._lazy finds without them
            if nd[0] == "g":
                chunk_at[nd[1]][nd[2]] = k
            else:
                step_at[nd[1]] = k
        names = dec.transfers.names
        assert sr.tidx == {t: j for j, t in enumerate(names)} and sr.tidx is sr.tidx
        assert len(at) == 2 and at == (chunk_at, step_at) and at[0] == chunk_at
        c, s = at
        assert c == chunk_at and s == step_at and list(c) == list(chunk_at)
        assert at.made() is at.made()
        with pytest.raises(TypeError):
            hash(at)
    assert unread  # some decodes read neither (no overflow, no repair)


def test_tensor_of_refuses_a_bad_tensor_code() -> None:
    """A packed row whose tensor code is outside the names: an error, as ``made`` gives."""
    import struct

    from search_space import _ccore

    cdag = _ccore.load_extension("_cdag")
    for code in (-1, 2, 7):
        rows = struct.pack("8i", 0, code, 1, 1, 0, 1, 0, 1)
        pt = _cderive.PackedTransfers(cdag, ["t0", "t1"], {}, rows, (((0,),),), ["x"])
        with pytest.raises(ValueError, match="a bad row"):
            pt.tensor_of(0)
        with pytest.raises(ValueError, match="a bad row"):
            pt.made()


def test_packed_positions_refuse_a_table_of_the_wrong_length() -> None:
    """``_Positions`` checks the packed transfer positions against the names (one per
    transfer; ``_cdag.derive`` writes one placeholder when there is none) instead of
    cutting a mismatched table short (review of h100)."""
    from array import array

    from search_space._crows import _Positions

    chunks = array("i", [2, 2]).tobytes()  # one group with no chunk positions
    assert _Positions({}, array("i", [1]).tobytes(), [], array("i", [-1]).tobytes()).made() == ({}, {})
    assert _Positions({"g": 0}, chunks, ["t0"], array("i", [3]).tobytes()).made()[1] == {"t0": 3}
    for names, step in ((["t0", "t1"], [3]), (["t0"], [3, 4]), ([], [1, 2])):
        with pytest.raises(ValueError, match="transfer positions"):
            _Positions({"g": 0}, chunks, names, array("i", step).tobytes()).made()
