"""sha256 of texts that share prefixes, resumed from the shared prefix's hash state.

A candidate's id is the sha256 of its structural key's text (``candidate_id``), ~12 KB on
BERT-base b8, and breeding makes one for nearly every candidate it decodes. The children
of one parent and the neighbours a polish round decodes share the parent's text up to
their first change (a moved boundary, a new split, the order at the end): ~40 % of the
bytes hashed in a BERT-base tune's breeding were a prefix hashed before. sha256 reads its
input in order, so the state after a prefix is all that the rest needs: the texts are cut
into chunks of ``chunk`` bytes, and a trie keyed by (the node of the prefix before, the
chunk's bytes) keeps a copy of the hash state after each prefix it has seen. A text walks
the trie as far as its chunks are known, hashes on from the last state found (adding the
new prefixes' states) and finishes with its tail; a text met before (all its chunks and
its tail known) is answered from the memo of final digests. The digest is sha256's of
the whole text in every case (the same bytes in the same order; ``tests/autotune/
test_ids.py`` compares with :func:`hashlib.sha256`).

Bounded: past ``limit`` nodes (or final digests) the trie starts again (empty). Node ids
come from one counter that never restarts, so an entry a thread adds while another
clears is an orphan, never a wrong prefix.
"""

from __future__ import annotations

import hashlib
import itertools
from typing import Any

__all__ = ["PrefixDigests"]


class PrefixDigests:
    """``hexdigest(data)``: ``hashlib.sha256(data).hexdigest()``, reusing the hash states
    of prefixes of earlier texts (see the module doc)."""

    __slots__ = ("_done", "_ids", "_nodes", "chunk", "limit")

    def __init__(self, chunk: int = 1024, limit: int = 4096) -> None:
        if chunk < 1 or limit < 1:
            raise ValueError("chunk and limit must be positive")
        self.chunk, self.limit = chunk, limit
        # (node of the prefix before, the chunk) -> (its node, the hash state after it)
        self._nodes: dict[tuple[int, bytes], tuple[int, Any]] = {}
        # (node of the text's whole chunks, its tail) -> the text's digest
        self._done: dict[tuple[int, bytes], str] = {}
        self._ids = itertools.count(1)  # node 0: the empty prefix

    def __len__(self) -> int:
        """Prefix states kept."""
        return len(self._nodes)

    def hexdigest(self, data: bytes) -> str:
        nodes, c, n = self._nodes, self.chunk, len(data)
        if len(nodes) >= self.limit or len(self._done) >= self.limit:
            nodes.clear()
            self._done.clear()
        node, state, pos = 0, None, 0
        chunk = b""
        while pos + c <= n:
            chunk = data[pos:pos + c]
            hit = nodes.get((node, chunk))
            if hit is None:
                break
            node, state = hit
            pos += c
        if pos + c > n:  # every whole chunk known: the text may be one met before
            tail = data[pos:]
            got = self._done.get((node, tail))
            if got is not None:
                return got
        h = hashlib.sha256() if state is None else state.copy()
        ids = self._ids
        while pos + c <= n:
            if len(chunk) != c:
                chunk = data[pos:pos + c]
            h.update(chunk)
            nid = next(ids)
            nodes[(node, chunk)] = (nid, h.copy())
            node = nid
            pos += c
            chunk = b""
        tail = data[pos:]
        h.update(tail)
        out = h.hexdigest()
        self._done[(node, tail)] = out
        return out
