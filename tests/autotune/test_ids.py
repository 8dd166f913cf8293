"""Candidate ids hashed on from a shared prefix's state equal sha256 of the whole text
(autotune/sampling/_ids.py)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autotune.sampling._ids import PrefixDigests
from autotune.sampling._studies import candidate_id
from compiler.key_text import key_text
from compiler.target import Target
from search_space import build_space
from tests.sim.conftest import zoo_graph


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


@settings(max_examples=200, deadline=None)
@given(base=st.binary(min_size=0, max_size=80),
       edits=st.lists(st.tuples(st.integers(0, 80), st.binary(max_size=12), st.booleans()),
                      max_size=12),
       chunk=st.integers(1, 9), limit=st.integers(1, 40))
def test_digest_equals_sha256_of_the_whole_text(base, edits, chunk, limit):
    """Texts that share prefixes (edits of one text, repeats, cut at chunk edges, the trie
    starting again when full): every digest is sha256's."""
    d = PrefixDigests(chunk=chunk, limit=limit)
    texts = [base]
    for at, piece, cut in edits:
        prev = texts[at % len(texts)]
        k = min(at, len(prev))
        texts.append(prev[:k] + piece if cut else prev[:k] + piece + prev[k:])
    for t in texts + texts[::-1]:
        assert d.hexdigest(t) == _sha(t)
    assert len(d) <= limit + max(len(t) for t in texts) // chunk


def test_prefixes_are_reused_and_bounded():
    d = PrefixDigests(chunk=4, limit=6)
    a = b"0123456789abcdef"
    assert d.hexdigest(a) == _sha(a)
    assert len(d) == 4  # a state after each whole chunk
    b = a[:8] + b"XYZ"  # two chunks known, a short tail: no new state
    assert d.hexdigest(b) == _sha(b)
    assert len(d) == 4
    c = a[:12] + b"WXYZ"
    assert d.hexdigest(c) == _sha(c) and len(d) == 5
    e = b"another text, 4 chunks"
    assert d.hexdigest(e) == _sha(e) and len(d) == 10
    assert d.hexdigest(a) == _sha(a) and len(d) == 4  # was full: started again
    with pytest.raises(ValueError):
        PrefixDigests(chunk=0)


@pytest.mark.parametrize("name,batch,kw", [("tiny_cnn", 4, {}),
                                            ("bert_base", 4, {"seq": 64, "num_layers": 2})])
def test_candidate_ids_of_mutated_children_are_sha256_of_their_key_text(name, batch, kw):
    """Parents, their children and repeats: the id is the first 20 hex digits of the
    sha256 of the structural key's repr, as in every log."""
    g = zoo_graph(name, batch, **kw)
    space = build_space(g, Target.default())
    rng = np.random.default_rng(3)
    parents = [space.sample(rng) for _ in range(3)]
    seen = []
    for p in parents:
        seen.append(p)
        for _ in range(6):
            seen.append(space.mutate(p, rng))
    for s in seen + seen[:5]:
        text = key_text(s)
        assert text == repr(s.structural_key())
        assert candidate_id(s) == _sha(text.encode())[:20]
