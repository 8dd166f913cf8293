"""The featuriser's group, layout and edge tables, computed vectorised when flushed.

A layer of :class:`cost_model._features._Featuriser` (see :mod:`cost_model._feature_tables`):
a group config (op set and its chunks' placements), the layout of a result per sample,
and an edge (one group input from its producer, through transfers) each get one row.
"""

from __future__ import annotations

from itertools import repeat
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from compiler.footprint import (
    group_footprint,
)
from cost_model._feature_parts import _PartTables
from cost_model._feature_tables import (
    _DEDUP_BATCH,
    _E,
    _EDGE_BLOCK_CELLS,
    _EI,
    _G,
    _G_MAX,
    _GI,
    _GROUP_BLOCK_CELLS,
    _L1,
    _MAX_KEEP,
    _PAIR,
    _SALT,
    _SCOPE_CODE,
    _edge_hash,
    _OpSet,
)

if TYPE_CHECKING:
    from compiler.schedule import GraphSchedule, GroupSpec


class _GroupTables(_PartTables):
    """Groups, layouts and edges."""

    # ---- groups --------------------------------------------------------------------------------
    def group_of(self, gr: GroupSpec, info: _OpSet) -> int:
        """The group config of ``gr`` (new or seen), remembered by its placements' identities."""
        get = self.place_ids.get
        seen = tuple(get(id(p)) for p in gr.chunks)
        places = (tuple(map(self.place_of, gr.chunks)) if None in seen
                  else cast("tuple[int, ...]", seen))
        key = (info.ident, places)
        i = self.group_ids.get(key)
        if i is None:
            i = self.new_group(key, gr, info, places)
        if len(self.group_obj_keep) >= _MAX_KEEP:
            self.group_obj_ids.clear()
            self.group_obj_keep.clear()
        # the placements stay alive with their tuple, so their ids are not reused
        self.group_obj_ids[(info.ident, *map(id, gr.chunks))] = i
        self.group_obj_keep.append(gr.chunks)
        return i

    def new_group(self, key: Any, gr: GroupSpec, info: _OpSet, places: tuple[int, ...]) -> int:
        """Register a group config; its row is computed by the next :meth:`flush_groups`."""
        i = self.group_ids[key] = len(self.g_info)
        self.g_info.append(info)
        self.g_chunks.append(gr.chunks)
        self.g_pending.append(i)
        self.g_meta.append((info.ident, gr.split, info.out_index, self.g_place.n, len(places)))
        self.g_place.extend(np.asarray(places, dtype=np.int64).reshape(-1, 1))
        return i

    def flush_groups(self) -> None:
        """Compute the rows and result layouts of the groups met since the last call."""
        if not self.g_pending:
            return
        pend, self.g_pending = self.g_pending, []
        base = self.g_rows.n
        assert pend[0] == base and pend[-1] == base + len(pend) - 1
        width = len(_G) + 3 * self.n_cores
        rows = np.zeros((len(pend), width))
        scopes = np.zeros((len(pend), self.batch), dtype=np.int8)
        parts = np.zeros((len(pend), self.batch), dtype=np.int32)
        # the vectorised path: groups whose chunks' core parts have equal sizes and whose split
        # divides the batch (all the search space decodes)
        equal = self.b_info.a[: self.b_info.n, 1][self.p_info.a[: self.p_info.n, 1]] > 0
        pend_a = np.asarray(pend, dtype=np.int64)
        flat, n_chunks = self._group_places(pend_a)
        split = self.g_meta.a[pend_a, 1]
        ok = np.logical_and.reduceat(equal[flat], np.cumsum(n_chunks) - n_chunks)
        ok &= (self.batch % split == 0) & (n_chunks == split)
        ok &= self.vectorised
        fast = np.flatnonzero(ok).tolist()
        for j in np.flatnonzero(~ok).tolist():
            rows[j], scopes[j], parts[j] = self._group_slow(pend[j])
        # blocks of groups, so the per-chunk arrays stay small
        cells = np.cumsum(split[fast] * width + self.batch)
        lo = 0
        while lo < len(fast):
            hi = max(lo + 1, int(np.searchsorted(cells, cells[lo] + _GROUP_BLOCK_CELLS)))
            sel = np.asarray(fast[lo:hi])
            rows[sel], scopes[sel], parts[sel] = self._groups_fast(pend_a[sel])
            lo = hi
        self.g_rows.extend(rows)
        self.g_layout.extend(self._group_layouts(scopes, parts)[:, None])

    def _group_layouts(self, scopes: np.ndarray, parts: np.ndarray) -> np.ndarray:
        """Layout ids of new groups' results (one per row of ``scopes``, ``parts``); equal
        layouts share one (for small batches) so edges move bytes between fewer pairs."""
        if self.batch > _DEDUP_BATCH:
            at = self.l_scope.extend(scopes)
            self.l_part.extend(parts)
            return np.arange(at, at + len(scopes))
        both = np.concatenate([scopes.astype(np.int32), parts], axis=1)
        # rows with equal hashes, checked equal, are looked up once
        with np.errstate(over="ignore"):
            h = (both.astype(np.uint64) * _SALT[:both.shape[1]]).sum(1)
        _, first, inv = np.unique(h, return_index=True, return_inverse=True)
        inv = inv.ravel()
        if not (both[first][inv] == both).all():  # two layouts with one hash
            first, inv = np.arange(len(both)), np.arange(len(both))
        keys = [r.tobytes() for r in both[first]]
        get = self.g_layout_ids.get
        ids = np.fromiter(map(get, keys, repeat(-1)), dtype=np.int64, count=len(keys))
        new = np.flatnonzero(ids < 0)  # distinct: one row per hash
        if len(new):
            at = self.l_scope.extend(scopes[first[new]])
            self.l_part.extend(parts[first[new]])
            ids[new] = np.arange(at, at + len(new))
            self.g_layout_ids.update(zip([keys[j] for j in new.tolist()], ids[new].tolist()))
        return ids[inv]

    def _groups_fast(self, gids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Rows, result scopes and core parts per sample of groups whose core parts are equal.

        The same quantities as :meth:`_group_slow`, vectorised over all their chunks.
        """
        t, nc, ng = self.t, self.n_cores, len(_G)
        p_info = self.p_info.a[: self.p_info.n]
        b_info = self.b_info.a[: self.b_info.n]
        meta = self.g_meta.a[gids]
        splits, ident = meta[:, 1], meta[:, 0]
        n_g = self.batch // splits
        pl = self._group_places(gids)[0]
        grp = np.repeat(np.arange(len(gids)), splits)
        starts = np.concatenate([[0], np.cumsum(splits)[:-1]])
        scope = p_info[pl, 0]
        bind = p_info[pl, 1]
        nparts, k, ncores = b_info[bind, 0], b_info[bind, 1], b_info[bind, 2]
        n = n_g[grp]
        spp = n // nparts
        oi = ident[grp]
        # per-core costs: once per (op set, samples per part, cores per part, cores)
        assert spp.max() < 1 << 24 and ncores.max() < 1 << 10
        key = ((oi * (1 << 24) + spp) * (1 << 10) + k) * (1 << 10) + ncores
        _, first, inv = np.unique(key, return_index=True, return_inverse=True)
        cw = self.costs_many(oi[first], spp[first], k[first], ncores[first]).T[:, inv.ravel()]
        total = np.max(cw[[0, 2, 3, 4]], axis=0) + cw[5]
        # op-set quantities per chunk
        ov = self.os_vals.a[oi].T
        w, gs, gf, osb, ofb = ov[0], ov[1], ov[2], ov[3], ov[4]
        is_l1, is_llb, is_ddr = (scope == _L1), (scope == _SCOPE_CODE["LLB"]), (scope == 0)
        # one column per chunk (rows: the group row's quantities, then per core)
        R = np.zeros((ng + 3 * nc, len(pl)))
        for j, name in enumerate(("mme", "useful", "vme", "move", "wbound")):
            R[_GI[name]] = cw[j]
        R[_GI["serial"]] = total
        bc = t.llb.broadcast
        R[_GI["ddr_w"]] = w if bc else w * ncores
        gathered = gs * n + gf * ncores
        out = osb * n + ofb
        R[_GI["ddr_act"]] = gathered + np.where(is_ddr, out, 0.0)
        R[_GI["out_l1"]] = np.where(is_l1, out, 0.0)
        R[_GI["out_llb"]] = np.where(is_llb, out, 0.0)
        R[_GI["out_ddr"]] = np.where(is_ddr, out, 0.0)
        R[_GI["llb"]] = (2.0 * w if bc else 0.0) + np.where(is_llb, out, 0.0)
        R[_GI["llb_res"]] = np.where(is_llb, out, 0.0)
        R[_GI["cores"]] = ncores
        R[_GI["cpp"]] = ncores / nparts
        R[_GI["spc"]] = spp * nparts / ncores
        member = self.b_member.a[: self.b_member.n].T[:, bind]
        R[ng:ng + nc] = total * member
        per_core = w + (gathered + np.where(is_l1, 0.0, out)) / ncores
        R[ng + nc:ng + 2 * nc] = per_core * member
        R[ng + 2 * nc:] = np.where(is_l1, osb * spp / np.maximum(k, 1) + ofb, 0.0) * member
        rows = np.add.reduceat(R, starts, axis=1).T
        n_ops = ov[5, starts]
        rows[:, _GI["ws_max"]] = np.maximum.reduceat(cw[6], starts)
        rows[:, _GI["split_max"]] = splits
        rows[:, _GI["critical"]] = rows[:, ng:ng + nc].max(1)
        rows[:, _GI["chunks"]] = splits
        rows[:, _GI["ops"]] = n_ops
        rows[:, _GI["split_ops"]] = splits * n_ops
        # result layouts: sample s of a group is in chunk s // n, part (s mod n) // spp
        s = np.arange(self.batch)[None, :]
        ch = starts[:, None] + s // n_g[:, None]
        part = (s % n_g[:, None]) // spp[ch]
        width = max(map(len, self.b_tids))
        tids = np.zeros((len(self.b_tids), width), dtype=np.int32)
        for b, ids in enumerate(self.b_tids):
            tids[b, :len(ids)] = ids
        return rows, scope[ch], tids[bind[ch], part]

    def chunk_id(self, ops: tuple[int, ...], info: _OpSet, n: int, scope: str,
                 bind: tuple[tuple[int, ...], ...]) -> int:
        """Row of one chunk of ``n`` samples of an op set placed at (scope, bind)."""
        key = (info.ident, n, scope, bind)
        hit = self.chunk_ids.get(key)
        if hit is not None:
            return hit
        t = self.t
        nc = self.n_cores
        row = [0.0] * (len(_G) + 3 * nc)  # the group row, then busy, port, L1 results per core
        spp = n // len(bind)
        cores = [c for p in bind for c in p]
        fp = group_footprint(self.g, ops)
        step = ws = 0.0
        best: tuple[float, ...] = (0.0,) * 6
        parts: list[int] = []
        busy0, l1_0 = len(_G), len(_G) + 2 * nc
        l1_out = info.out_sample * spp
        for part in bind:
            k = len(part)
            c = self.cost(ops, spp, k, len(cores))
            total = max(c[0], c[2], c[3], c[4]) + c[5]
            for core in part:
                row[busy0 + core] += total
                if scope == "L1":
                    row[l1_0 + core] += l1_out / k + info.out_fixed
            if total >= step:
                step, best = total, c
            ws = max(ws, fp.peak_bytes(spp, k))
            parts.extend([self.tuple_id(part)] * spp)
        for name, v in zip(("mme", "useful", "vme", "move", "wbound"), best):
            row[_GI[name]] = v
        row[_GI["serial"]] = step
        row[_GI["ws_max"]] = ws
        w = info.weights
        # weights: once per chunk through the LLB broadcast, else once per core
        row[_GI["ddr_w"]] = w if t.llb.broadcast else w * len(cores)
        llb = 2.0 * w if t.llb.broadcast else 0.0
        gathered = info.gather_sample * n + info.gather_fixed * len(cores)
        out = info.out_sample * n + info.out_fixed
        row[_GI["ddr_act"]] = gathered + (out if scope == "DDR" else 0.0)
        row[_GI["out_" + scope.lower()]] = out
        if scope == "LLB":
            llb += out
            row[_GI["llb_res"]] = out
        row[_GI["llb"]] = llb
        per_core = w + (gathered + (out if scope != "L1" else 0.0)) / len(cores)
        for core in cores:
            row[busy0 + nc + core] += per_core
        row[_GI["cores"]] = len(cores)
        row[_GI["cpp"]] = len(cores) / len(bind)
        row[_GI["spc"]] = spp * len(bind) / len(cores)
        i = self.chunk_ids[key] = self.c_rows.append(row)
        self.c_parts.append(np.array(parts, dtype=np.int32))
        return i

    def _group_slow(self, gid: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Row, result scopes and core parts per sample of one group, chunk by chunk."""
        info, chunks, split = self.g_info[gid], self.g_chunks[gid], int(self.g_meta.a[gid, 1])
        n = self.batch // split
        ids = [self.chunk_id(info.ops, info, n, p.mem_scope, p.core_bind) for p in chunks]
        rows = self.c_rows.a[ids]
        total = rows.sum(0)
        nc, ng = self.n_cores, len(_G)
        row = total[:ng]
        busy = total[ng:ng + nc]
        row[_G_MAX] = rows[:, _G_MAX].max(0)
        row[_GI["critical"]] = busy.max()
        row[_GI["chunks"]] = split
        row[_GI["ops"]] = info.n_ops
        row[_GI["split_max"]] = split
        row[_GI["split_ops"]] = split * info.n_ops
        scopes = np.repeat([_SCOPE_CODE[p.mem_scope] for p in chunks], n)
        return total, scopes, np.concatenate([self.c_parts[c] for c in ids])

    # ---- layouts -------------------------------------------------------------------------------
    def layout(self, key: Any, scopes: Any, parts: Any) -> int:
        """Intern a per-sample layout (scope code and core-part id of every sample)."""
        i = self.layout_ids.get(key)
        if i is None:
            i = self.layout_ids[key] = self.l_scope.append(scopes)
            self.l_part.append(parts)
        return i

    def transfer_layouts(self, s: GraphSchedule) -> dict[tuple[str, int], int]:
        """(tensor, split it is cut into) -> layout of the transfers that re-chunk it."""
        by: dict[tuple[str, int], list[tuple[tuple[int, ...], str, int]]] = {}
        get = self.bind_objs.get
        for tr in s.transfers:
            p = tr.placement  # made per candidate, mostly; their core bindings are shared
            b = get(id(p.core_bind))
            if b is None:
                b = self.bind_of(p.core_bind)
            by.setdefault((tr.tensor, tr.dst_factor), []).append((tr.dst_chunks, p.mem_scope, b))
        return {(tensor, factor): self.transfer_layout(factor, items)
                for (tensor, factor), items in by.items()}

    def transfer_layout(self, factor: int, items: list[tuple[tuple[int, ...], str, int]]) -> int:
        """Layout of the transfers re-chunking one tensor ``factor`` ways: per transfer, its
        destination chunks, scope and core binding."""
        key = ("transfer", factor, tuple(items))
        i = self.layout_ids.get(key)
        if i is None:
            n = self.batch // factor
            # lists: a few dozen samples, where numpy's per-call overhead dominates
            scopes = [_SCOPE_CODE["DDR"]] * self.batch
            parts = [0] * self.batch
            for chunks, scope_name, b in items:
                scope = [_SCOPE_CODE[scope_name]] * n
                tids = self.b_tids[b]
                r = n // len(tids)
                ids = [t for t in tids for _ in range(r)]
                if len(ids) != n:
                    raise ValueError(f"a transfer's {n} samples per chunk do not divide among "
                                     f"{len(tids)} core parts")
                for d in chunks:
                    scopes[d * n:(d + 1) * n] = scope
                    parts[d * n:(d + 1) * n] = ids
            i = self.layout(key, scopes, parts)
        return i

    # ---- edges: one group input, from its producer (through transfers) ---------------------------
    def new_edge(self, key: tuple[int, int, int, int], streams: bool) -> int:
        i = self.edge_ids[key] = self.e_rows.n + self.n_pending
        self.pending.append((*key, streams))
        self.n_pending += 1
        return i

    def new_edges(self, rows: np.ndarray) -> int:
        """Register edges ``rows`` (producer, consumer, tensor, transfers' layout, streams) in
        one go; the id of the first (found by :meth:`find_edges`, not by ``edge_ids``)."""
        if self.pending:  # keep the order ids were handed out in
            self.pend_chunks.append(np.array(self.pending, dtype=np.int64).reshape(-1, 5))
            self.pending = []
        first = self.e_rows.n + self.n_pending
        self.pend_chunks.append(rows)
        self.n_pending += len(rows)
        return first

    def find_edges(self, keys: np.ndarray) -> np.ndarray:
        """Ids of the computed edges with ``keys`` (rows of producer, consumer, tensor,
        transfers' layout), -1 where not found: a sorted hash of every key, each hit checked
        against the key itself (a collision is a miss: at worst an edge is computed twice)."""
        n = self.e_keys.n
        if self.e_index is None or len(self.e_index[0]) != n:
            h = _edge_hash(self.e_keys.a[:n])
            order = np.argsort(h, kind="stable")
            self.e_index = (h[order], order)
        hs, ids = self.e_index
        if not n:
            return np.full(len(keys), -1, dtype=np.int64)
        pos = np.minimum(np.searchsorted(hs, _edge_hash(keys)), n - 1)
        e = ids[pos]
        return np.where((self.e_keys.a[e] == keys).all(1), e, -1)

    def flush_edges(self) -> None:
        """Compute the rows of the edges met since the last call, vectorised."""
        if self.pending:
            self.pend_chunks.append(np.array(self.pending, dtype=np.int64).reshape(-1, 5))
            self.pending = []
        if not self.pend_chunks:
            return
        pend = np.concatenate(self.pend_chunks)
        self.pend_chunks, self.n_pending = [], 0
        self.e_keys.extend(pend[:, :4])
        g_layout = self.g_layout.a[: self.g_layout.n, 0]
        member = self.members.a[: len(self.tuple_ids)]
        frac = member / member.sum(1)[:, None]
        rows, ports = self._edges(pend, g_layout, frac)  # movement is computed in blocks
        self.e_rows.extend(rows)
        self.e_port.extend(ports)

    def _move(self, src: np.ndarray, dst: np.ndarray, dst_l1: bool, frac: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per byte of every sample moved from layouts ``src`` to ``dst`` (one per edge):
        DDR, LLB, NoC and hop-weighted NoC bytes, bytes staying in place (summed over
        samples) and DMA-port bytes per core. ``dst_l1``: the destination is staged in L1
        (a consumer reading its input) whatever the layout's scope. ``frac``: each core
        part's share of every core."""
        ss = self.l_scope.a[src].astype(np.int64)
        sp = self.l_part.a[src].astype(np.int64)
        dp = self.l_part.a[dst].astype(np.int64)
        ds = np.full_like(ss, _L1) if dst_l1 else self.l_scope.a[dst].astype(np.int64)
        ddr_c, llb_c = _SCOPE_CODE["DDR"], _SCOPE_CODE["LLB"]
        both = (ss == _L1) & (ds == _L1)
        read = (ss != _L1) & (ds == _L1)  # DDR/LLB -> L1
        write = (ss == _L1) & (ds != _L1)  # L1 -> DDR/LLB
        system = (ss != _L1) & (ds != _L1) & (ss != ds)  # LLB <-> DDR
        self.pairs(sp[both], dp[both])
        ddr = ((read & (ss == ddr_c)) | (write & (ds == ddr_c)) | system).sum(1)
        llb = ((read & (ss == llb_c)) | (write & (ds == llb_c)) | system).sum(1)
        noc = np.where(both, self.pair_noc[sp, dp], 0.0).sum(1)
        hop = np.where(both, self.pair_hop[sp, dp], 0.0).sum(1)
        stay = np.where(both, self.pair_stay[sp, dp], 0.0).sum(1)
        port = np.einsum("eb,ebc->ec", both.astype(float), self.pair_port[sp, dp])
        port += np.einsum("eb,ebc->ec", read.astype(float), frac[dp])
        port += np.einsum("eb,ebc->ec", write.astype(float), frac[sp])
        return ddr, llb, noc, hop, stay, port

    def _move_pairs(self, src: np.ndarray, dst: np.ndarray, dst_l1: bool, frac: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                               np.ndarray]:
        """:meth:`_move`, computed once per pair of layouts (edges share few pairs: equal
        layouts share an id) and kept."""
        index, rows = self.mv_index[dst_l1], self.mv_rows[dst_l1]
        u, inv = np.unique(src * _PAIR + dst, return_inverse=True)
        at = np.fromiter(map(index.get, u.tolist(), repeat(-1)), dtype=np.int64, count=len(u))
        new = np.flatnonzero(at < 0)
        block = max(1, _EDGE_BLOCK_CELLS // (self.batch * self.n_cores))
        for lo in range(0, len(new), block):
            sel = new[lo:lo + block]
            ddr, llb, noc, hop, stay, port = self._move(u[sel] // _PAIR, u[sel] % _PAIR, dst_l1,
                                                        frac)
            first = rows.extend(np.column_stack([ddr, llb, noc, hop, stay, port]))
            at[sel] = np.arange(first, first + len(sel))
            index.update(zip(u[sel].tolist(), at[sel].tolist()))
        R = rows.a[at[inv.ravel()]]
        return R[:, 0], R[:, 1], R[:, 2], R[:, 3], R[:, 4], R[:, 5:]

    def _edges(self, pend: np.ndarray, g_layout: np.ndarray, frac: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
        """Rows of edges ``pend`` (producer, consumer, tensor, transfers' layout, streams)."""
        m = len(pend)
        pid, cid, tix, mid, streams = pend.T
        streams = streams.astype(bool)
        tb = self.t_bytes.a[tix]
        sb, fb = tb[:, 0], tb[:, 1]
        is_in = pid < 0
        src = np.where(is_in, 0, g_layout[np.maximum(pid, 0)])
        dst = g_layout[cid]
        via = mid >= 0
        # the consumer reads from the transfers' layout when there is one
        first = np.where(via, mid, src)
        ddr, llb, noc, hop, stay, port = self._move_pairs(first, dst, True, frac)
        # the consumer streams an input read from LLB/DDR tile by tile when it can; else the
        # input is staged in L1 before it starts (so are transfers' moves: steps of their own)
        ddr_staged = np.where(streams, 0.0, ddr)
        llb_staged = np.where(streams, 0.0, llb)
        if via.any():
            d2, l2, n2, h2, _, p2 = self._move_pairs(src[via], mid[via], False, frac)
            ddr[via] += d2
            llb[via] += l2
            noc[via] += n2
            hop[via] += h2
            port[via] += p2
            ddr_staged[via] += d2
            llb_staged[via] += l2
        rows = np.zeros((m, len(_E)))
        rows[:, _EI["ddr_staged"]] = ddr_staged * sb
        rows[:, _EI["llb_staged"]] = llb_staged * sb
        rows[:, _EI["ddr"]] = ddr * sb
        rows[:, _EI["llb"]] = llb * sb
        rows[:, _EI["noc"]] = noc * sb
        rows[:, _EI["hop_bytes"]] = hop * sb
        rows[:, _EI["stay"]] = stay * sb
        rows[:, _EI["read"]] = self.batch * sb
        ports = port * sb[:, None]
        # capacity estimate: the producer's L1 results and the consumer's, next to its working set
        nc, ng = self.n_cores, len(_G)
        l1 = self.g_rows.a[:, ng + 2 * nc:ng + 3 * nc]
        p0 = np.maximum(pid, 0)
        prod_l1 = np.where(is_in[:, None], 0.0, l1[p0])
        rows[:, _EI["est_l1"]] = (prod_l1 + l1[cid]).max(1) + self.g_rows.a[cid, _GI["ws_max"]]
        llb_res = self.g_rows.a[:, _GI["llb_res"]]
        rows[:, _EI["est_llb"]] = np.where(is_in, 0.0, llb_res[p0]) + llb_res[cid]
        for k_ in np.flatnonzero(fb):  # unbatched tensors: every consumer core needs a copy
            self._fixed_edge(rows[k_], ports[k_], int(pid[k_]), int(cid[k_]), float(fb[k_]))
        return rows, ports

    def _fixed_edge(self, row: np.ndarray, port: np.ndarray, pid: int, cid: int, fb: float
                    ) -> None:
        scope = _SCOPE_CODE["DDR"] if pid < 0 else int(self.l_scope.a[self.g_layout.a[pid, 0], 0])
        src = self.g_chunks[pid][0].cores if pid >= 0 else ()
        src_cores = set(src)
        first = src[0] if src else 0
        for place in self.g_chunks[cid]:
            for core in place.cores:
                row[_EI["read"]] += fb
                if scope == _SCOPE_CODE["L1"]:
                    if core in src_cores:
                        row[_EI["stay"]] += fb
                        continue
                    row[_EI["noc"]] += fb
                    row[_EI["hop_bytes"]] += fb * self.hops[first, core]
                    port[first] += fb
                elif scope == _SCOPE_CODE["DDR"]:
                    row[_EI["ddr"]] += fb
                elif scope == _SCOPE_CODE["LLB"]:
                    row[_EI["llb"]] += fb
                port[core] += fb

    def _group_places(self, gids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The placements of groups ``gids``, one after another, and how many each has."""
        meta = self.g_meta.a[gids]
        cnt = meta[:, 4]
        at = np.repeat(meta[:, 3] - (np.cumsum(cnt) - cnt), cnt) + np.arange(int(cnt.sum()))
        return self.g_place.a[at, 0], cnt
