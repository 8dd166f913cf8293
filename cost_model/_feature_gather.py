"""The coded gather: schedules the search space decoded, their table rows gathered by code.

A layer of :class:`cost_model._features._Featuriser` (see :mod:`cost_model._feature_tables`):
codes (:mod:`compiler.codes`) map to rows through one
:class:`cost_model._feature_tables._CodeMaps` per producer's value table, gathered with
numpy over all candidates at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from compiler.codes import ScheduleCodes, ValueTable
from cost_model._feature_tables import (
    _GROUPS,
    _MAX_KEEP,
    _STEPS,
    _TRANSFERS,
    _CodeMaps,
    _edge_hash,
    _misc,
    _run_hash,
    _Walked,
)
from cost_model._feature_walk import _ObjectWalk

if TYPE_CHECKING:
    pass


class _CodedGather(_ObjectWalk):
    """Gather table rows of coded schedules."""

    # ---- schedules with codes -----------------------------------------------------------------
    def _maps(self, table: ValueTable) -> _CodeMaps:
        m = self.code_maps.get(id(table))
        if m is None:
            if len(self.code_maps) >= 2:  # producers start new tables rarely: keep the last two
                del self.code_maps[next(iter(self.code_maps))]
            m = self.code_maps[id(table)] = _CodeMaps(table)
        return m

    def _gather(self, m: _CodeMaps, codes: list[ScheduleCodes]) -> _Walked:
        """:meth:`_walk` for schedules with codes in ``m.table``: the same rows, gathered with
        numpy (identical results: the same table rows, summed in the same order)."""
        n = len(codes)
        ar = np.arange(n)
        # groups
        n_g = np.fromiter(map(len, map(_GROUPS, codes)), dtype=np.int64, count=n)
        gid = self._code_groups(m, np.concatenate(list(map(_GROUPS, codes))))
        g_s = np.repeat(ar, n_g)
        meta = self._group_meta()[gid]
        ident, split, out_ti = meta[:, 0], meta[:, 1], meta[:, 2]
        # edges: each group's inputs, in order
        ptr, cnt, in_ti, in_streams = self._opset_inputs()
        e_cnt = cnt[ident]
        e_grp = np.repeat(np.arange(len(gid)), e_cnt)
        first = np.cumsum(e_cnt) - e_cnt
        src = ptr[ident][e_grp] + np.arange(len(e_grp)) - first[e_grp]
        eti, streams = in_ti[src], in_streams[src]
        e_s = g_s[e_grp]
        csplit = split[e_grp]
        # producers: the (last) group of the same schedule with the input as its result
        T = len(self.tensor_index) + 1
        gkey = g_s * T + out_ti
        order = np.argsort(gkey, kind="stable")
        sk = gkey[order]
        ekey = e_s * T + eti
        pos = np.maximum(np.searchsorted(sk, ekey, side="right") - 1, 0)
        found = sk[pos] == ekey
        p_occ = order[pos]
        pid = np.where(found, gid[p_occ], -1)
        psplit = np.where(found, split[p_occ], 1)
        # transfers' layouts, per (schedule, tensor, factor), for inputs re-chunked between splits
        n_t = np.fromiter(map(len, map(_TRANSFERS, codes)), dtype=np.int64, count=n)
        t_code = np.concatenate(list(map(_TRANSFERS, codes)))
        mid = np.full(len(e_grp), -1, dtype=np.int64)
        need = psplit != csplit
        if len(t_code) and need.any():
            t_ti, t_factor = self._code_transfers(m)
            F = int(max(t_factor[t_code].max(), split.max())) + 1
            tkey = (np.repeat(ar, n_t) * T + t_ti[t_code]) * F + t_factor[t_code]
            o = np.argsort(tkey, kind="stable")  # a tensor's transfers keep their order
            tk = tkey[o]
            starts = np.flatnonzero(np.concatenate([[True], tk[1:] != tk[:-1]]))
            uk, lay_a = tk[starts], self._code_layouts(m, m.t_item[t_code[o]], starts)
            q = (e_s * T + eti) * F + csplit
            at = np.minimum(np.searchsorted(uk, q), len(uk) - 1)
            mid = np.where(need & (uk[at] == q), lay_a[at], -1)
        cid = gid[e_grp]
        keys = np.column_stack([pid, cid, eti, mid])
        eids = self.find_edges(keys)
        miss = np.flatnonzero(eids < 0)
        if len(miss):
            km = keys[miss]
            _, first, inv = np.unique(_edge_hash(km), return_index=True, return_inverse=True)
            inv = inv.ravel()
            if not (km[first][inv] == km).all():  # two keys with one hash: sort the keys
                _, first, inv = np.unique(km, axis=0, return_index=True, return_inverse=True)
                inv = inv.ravel()
            at = self.new_edges(np.column_stack([km[first], streams[miss[first]]]))
            eids[miss] = at + inv
        g_off = np.cumsum(n_g) - n_g
        e_n = np.bincount(e_s, minlength=n)
        e_off = np.cumsum(e_n) - e_n
        # interleave, from the steps' names
        o_code = np.concatenate(list(map(_STEPS, codes)))
        n_steps = np.fromiter(map(len, map(_STEPS, codes)), dtype=np.int64, count=n)
        names = self._code_steps(m)[o_code]
        differ = (names[1:] != names[:-1]).astype(np.float64)
        return gid, g_off, eids, e_off, e_grp, _misc(n_steps, n_t.astype(np.float64), differ)

    def _code_groups(self, m: _CodeMaps, codes: np.ndarray) -> np.ndarray:
        """Group config of each group code (new ones registered in one go, from the codes of
        their op tuples and placements)."""
        table = m.table
        if len(m.group) < len(table.groups):
            grow = len(table.groups) - len(m.group)
            m.group = np.concatenate([m.group, np.full(grow, -1, dtype=np.int64)])
            m.g_ops = np.concatenate([m.g_ops, np.asarray(table.group_ops[-grow:], np.int64)])
            m.g_first = np.concatenate([m.g_first, np.asarray(table.group_first[-grow:],
                                                               np.int64)])
            m.g_places = np.concatenate([m.g_places, np.asarray(
                table.group_places[len(m.g_places):], dtype=np.int64)])
            m.g_split = np.concatenate([m.g_split, np.fromiter(
                (gr.split for gr in table.groups[-grow:]), dtype=np.int64, count=grow)])
            m.g_count = np.diff(np.append(m.g_first, len(m.g_places)))
        gid = m.group[codes]
        new = gid < 0
        if not new.any():
            return gid
        if len(m.ops_ident) < len(table.ops):
            m.ops_ident = np.concatenate([m.ops_ident, np.fromiter(
                ((self.ops_ids.get(id(ops)) or self.opset_of(ops)).ident
                 for ops in table.ops[len(m.ops_ident):]), dtype=np.int64)])
        if len(m.place_id) < len(table.placements):
            m.place_id = np.concatenate([m.place_id, np.fromiter(
                map(self.place_of, table.placements[len(m.place_id):]), dtype=np.int64)])
        nc = np.unique(codes[new])
        groups = table.groups
        grs = [groups[c] for c in nc.tolist()]
        cnt = m.g_count[nc]
        start = np.cumsum(cnt) - cnt
        at = np.repeat(m.g_first[nc] - start, cnt) + np.arange(int(cnt.sum()))
        flat_a = m.place_id[m.g_places[at]]
        ident = m.ops_ident[m.g_ops[nc]]
        infos = [self.opset_list[i] for i in ident.tolist()]
        base = len(self.g_info)
        out_index = np.fromiter((info.out_index for info in infos), dtype=np.int64,
                                count=len(infos))
        split = m.g_split[nc]
        self.g_meta.extend(np.column_stack([ident, split, out_index,
                                            self.g_place.n + start, cnt]))
        self.g_place.extend(flat_a[:, None])
        # as new_group, without the look-up by value: a producer's codes are values already
        # (a value under two codes would only cost a second, equal row)
        self.g_info.extend(infos)
        self.g_chunks.extend(gr.chunks for gr in grs)
        self.g_pending.extend(range(base, base + len(grs)))
        m.group[nc] = np.arange(base, base + len(grs))
        return m.group[codes]

    def _group_meta(self) -> np.ndarray:
        """Per group config: op set, split, result tensor index, first placement, placements."""
        return self.g_meta.a[: self.g_meta.n]

    def _opset_inputs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per op set: first input, inputs; per input: tensor index, streams (flat arrays)."""
        if self._inputs is None or len(self._inputs[0]) != len(self.os_in_ptr):
            self._inputs = (np.asarray(self.os_in_ptr, dtype=np.int64),
                            np.asarray(self.os_in_cnt, dtype=np.int64),
                            np.asarray(self.os_in_ti, dtype=np.int64),
                            np.asarray(self.os_in_streams, dtype=bool))
        return self._inputs

    def _code_transfers(self, m: _CodeMaps) -> tuple[np.ndarray, np.ndarray]:
        """Tensor index and destination factor of each transfer code."""
        items = m.table.transfers
        if len(m.t_ti) < len(items):
            new = items[len(m.t_ti):]
            m.t_ti = np.concatenate([m.t_ti, np.fromiter((self.tensor(it.tensor) for it in new),
                                                         dtype=np.int64, count=len(new))])
            m.t_factor = np.concatenate([m.t_factor, np.fromiter(
                (it.dst_factor for it in new), dtype=np.int64, count=len(new))])
            ids = m.item_ids
            item = []
            for it in new:  # the tensor aside: runs of other tensors' transfers share layouts
                p = it.placement
                b = self.bind_objs.get(id(p.core_bind))
                v = (it.dst_factor, it.dst_chunks, p.mem_scope,
                     self.bind_of(p.core_bind) if b is None else b)
                i = ids.get(v)
                if i is None:
                    i = ids[v] = len(m.items)
                    m.items.append(v)
                item.append(i)
            m.t_item = np.concatenate([m.t_item, np.asarray(item, dtype=np.int64)])
        return m.t_ti, m.t_factor

    def _code_layouts(self, m: _CodeMaps, oc: np.ndarray, starts: np.ndarray) -> np.ndarray:
        """Layout of each run of transfer items ``oc[starts[j]:starts[j + 1]]`` (one tensor's
        transfers in one schedule): runs seen before are found by a sorted hash of the run,
        checked code by code against the run itself; the others by :meth:`_code_layout`."""
        n = len(oc)
        lens = np.diff(np.append(starts, n))
        pos = np.arange(n) - np.repeat(starts, lens)
        h = _run_hash(oc, starts, lens, pos)
        lay = np.full(len(starts), -1, dtype=np.int64)
        known = m.known_runs()
        if known is not None:
            hs, order, k_codes, k_first, k_len, k_lay = known
            k = order[np.minimum(np.searchsorted(hs, h), len(hs) - 1)]
            ok = (hs[np.minimum(np.searchsorted(hs, h), len(hs) - 1)] == h) & (k_len[k] == lens)
            at = np.minimum(np.repeat(k_first[k], lens) + pos, len(k_codes) - 1)
            ok &= np.logical_and.reduceat(k_codes[at] == oc, starts)
            lay = np.where(ok, k_lay[k], -1)
        miss = np.flatnonzero(lay < 0)
        if len(miss):
            # equal runs (equal hashes, checked code by code) are looked up once
            _, fi, inv = np.unique(h[miss], return_index=True, return_inverse=True)
            inv = inv.ravel()
            rep = miss[fi][inv]
            ln = lens[miss]
            same = lens[rep] == ln
            within = np.arange(int(ln.sum())) - np.repeat(np.cumsum(ln) - ln, ln)
            at_r = np.repeat(starts[miss], ln) + within
            at_p = np.minimum(np.repeat(starts[rep], ln) + within, n - 1)
            same &= np.logical_and.reduceat(oc[at_r] == oc[at_p], np.cumsum(ln) - ln)
            if not same.all():  # two runs with one hash
                fi, inv = np.arange(len(miss)), np.arange(len(miss))
            reps = miss[fi]
            ocl = oc.tolist()
            get = m.layouts.get
            rep_lay = []
            for j, a, b in zip(reps.tolist(), starts[reps].tolist(),
                               (starts[reps] + lens[reps]).tolist()):
                key = tuple(ocl[a:b])
                i = get(key)
                if i is None:
                    i = self._code_layout(m, key)
                    m.add_run(int(h[j]), key, i)
                rep_lay.append(i)
            lay[miss] = np.asarray(rep_lay, dtype=np.int64)[inv]
        return lay

    def _code_layout(self, m: _CodeMaps, key: tuple[int, ...]) -> int:
        """:meth:`transfer_layout` of the transfer items ``key`` (one tensor's, in order;
        item ids of ``m``)."""
        items = [m.items[c] for c in key]
        i = self.transfer_layout(items[0][0], [it[1:] for it in items])
        if len(m.layouts) >= _MAX_KEEP:
            m.layouts.clear()
            m.clear_runs()
        m.layouts[key] = i
        return i

    def _code_steps(self, m: _CodeMaps) -> np.ndarray:
        """A name id per step code (steps of one group or transfer share it)."""
        steps = m.table.steps
        if len(m.step_name) < len(steps):
            ids = m.names
            new = [ids.setdefault(st.name, len(ids)) for st in steps[len(m.step_name):]]
            m.step_name = np.concatenate([m.step_name, np.asarray(new, dtype=np.int64)])
        return m.step_name
