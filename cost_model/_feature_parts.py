"""The featuriser's op sets, tensors, per-core compute, core parts, bindings and placements.

A layer of :class:`cost_model._features._Featuriser` (see :mod:`cost_model._feature_tables`).

A new op set's facts come from the search core's C analysis when it is built: its
inputs, output and streamable inputs from ``search_space._canalyse`` (through
:func:`search_space._cfirst.analyse`) and its working sets' profile from the packed
chain rows that analysis returns, walked by ``search_space._cwalk.profile`` (the walk of
:func:`compiler.footprint.group_profile`). Both are the compiled decoder's own analyses,
differential-tested against the Python definitions in ``tests/search_space/test_cfirst.py``
and ``test_cfoot.py`` and here in ``tests/cost_model/test_features_c.py``. The compiled
decoder leaves no Python footprint analysis in the graph's memo, so without them every op
set it met was analysed again in Python here (a third of the featuriser's time in a
ResNet-50 tune). Without the extensions, for op sets not in ascending order, where the C
analysis packs no rows, and always with ``GRAPHTUNE_PURE_PYTHON=1``, the Python
definitions (:func:`compiler.derive.group_io`, :func:`compiler.footprint.streamable_inputs`,
:func:`compiler.footprint.group_profile`) answer: the reference.
"""

from __future__ import annotations

from itertools import chain, repeat
from typing import TYPE_CHECKING, Any

import numpy as np

from compiler.derive import group_io
from compiler.footprint import (
    group_profile,
    peak_of,
    sample_bytes,
    streamable_inputs,
)
from cost_model._feature_tables import (
    _MAX_KEEP,
    _SCOPE_CODE,
    _op_costs,
    _OpSet,
    _slice_shape,
    _TableState,
)
from search_space._ccore import load_extension
from search_space._cfirst import analyse, ascending

if TYPE_CHECKING:
    from compiler.graph import Graph
    from compiler.schedule import Placement


def _analysed(g: Graph, ops: tuple[int, ...]) -> Any:
    """The C analysis of an op set (``search_space._cfirst.Analysis``), or None: the
    extension not built or pure Python forced, ``ops`` not strictly ascending, an op
    index the C analysis refuses (the Python definitions then answer, or raise, as the
    reference does), or no output found."""
    if not ascending(ops):
        return None
    try:
        an = analyse(load_extension("_canalyse"), g, ops)
    except (ValueError, OverflowError):
        return None
    return an if an is not None and an.outputs else None


class _PartTables(_TableState):
    """Op sets and their per-core costs; core parts, bindings, placements."""

    # ---- op sets, tensors and per-core compute -------------------------------------------------
    def tensor(self, name: str) -> int:
        i = self.tensor_index.get(name)
        if i is None:
            i = self.tensor_index[name] = self.t_bytes.append(sample_bytes(self.g, name))
        return i

    def opset(self, ops: tuple[int, ...]) -> _OpSet:
        hit = self.opsets.get(ops)
        if hit is None:
            g = self.g
            an = _analysed(g, ops)
            if an is not None:
                inputs, output, stream = an.inputs, an.outputs[0], an.streamable
            else:
                io = group_io(g, ops)
                inputs, output, stream = io.inputs, io.outputs[0], streamable_inputs(g, ops)
            # what group_footprint's summary adds up (weights; gathered rows per sample and
            # fixed), per op: the summary's live-byte profiles are not needed here
            ints = self.op_int_facts
            if ints is not None:  # ints: the loop's sums, in C (an ascending tuple is its set)
                order = ops if an is not None else sorted(set(ops))
                w, gs, gf = (sum(map(col.__getitem__, order)) for col in ints)
            else:
                w = gs = gf = 0
                for i in sorted(set(ops)):
                    w += self.op_weights[i]
                    gs += self.op_gathered[i][0]
                    gf += self.op_gathered[i][1]
            osb, ofb = sample_bytes(g, output)
            hit = self.opsets[ops] = _OpSet(
                ops, float(w), float(gs), float(gf), output, float(osb), float(ofb), inputs,
                tuple((t, self.tensor(t), t in stream) for t in inputs), len(ops),
                len(self.opset_list), self.tensor(output))
            if an is not None and an.pack is not None:
                self.os_pack[hit.ident] = an.pack[0]
            self.opset_list.append(hit)
            self.os_in_ptr.append(len(self.os_in_ti))
            self.os_in_cnt.append(len(hit.edges))
            self.os_in_ti.extend(ti for _, ti, _ in hit.edges)
            self.os_in_streams.extend(st for _, _, st in hit.edges)
            self.os_vals.append((hit.weights, hit.gather_sample, hit.gather_fixed, hit.out_sample,
                                 hit.out_fixed, hit.n_ops))
        return hit

    def opset_of(self, ops: tuple[int, ...]) -> _OpSet:
        """:meth:`opset`, remembered by the tuple's identity too."""
        hit = self.opset(ops)
        if len(self.ops_keep) >= _MAX_KEEP:
            self.ops_ids.clear()
            self.ops_keep.clear()
        self.ops_ids[id(ops)] = hit
        self.ops_keep.append(ops)
        return hit

    def cost(self, ops: tuple[int, ...], samples: int, cores: int, step_cores: int
             ) -> tuple[float, ...]:
        """(mme, useful, vme, move, wbound, fill) cycles of one core of a part."""
        key = (ops, samples, cores, step_cores)
        hit = self.costs.get(key)
        if hit is None:
            table = self.op_table(samples, cores, step_cores)
            hit = self.costs[key] = tuple(table[:, list(ops)].sum(axis=1).tolist())
        return hit

    def op_table(self, samples: int, cores: int, step_cores: int) -> np.ndarray:
        """(6, ops): each op's (mme, useful, vme, move, wbound, fill) cycles on one core of a
        part of ``cores`` cores sharing ``samples`` samples, in a step on ``step_cores`` cores
        (an op set's costs are the sums over its ops)."""
        wbw = self.wbw if self.t.llb.broadcast else self.wbw / max(step_cores, 1)
        return self.op_table_w(samples, cores, wbw)

    def op_table_w(self, samples: int, cores: int, wbw: float) -> np.ndarray:
        """:meth:`op_table` at weight bandwidth ``wbw``."""
        key = (samples, cores, wbw)
        hit = self.op_tables.get(key)
        if hit is None:
            hit = self.op_tables[key] = np.array(
                [_op_costs(self.shapes, (i,), samples, cores, self.t, wbw)
                 for i in range(len(self.shapes))], dtype=np.float64).reshape(-1, 6).T.copy()
        return hit

    def working_set(self, ident: int, samples: int, cores: int) -> float:
        """Per-core working set of op set ``ident`` (footprint peak) for a part of ``cores``
        cores sharing ``samples`` samples."""
        key = (ident, samples, cores)
        ws = self.ws_cache.get(key)
        if ws is None:
            # = group_footprint(...).peak_bytes(samples, cores), without the footprint's summary
            pack = self.os_pack.get(ident)
            walk = load_extension("_cwalk") if pack is not None else None
            if walk is not None:  # group_profile's walk (nothing streamed, not held) in C
                prof = walk.profile(pack, 0, False, False)[1]
            else:
                prof = group_profile(self.g, self.opset_list[ident].ops)
            ws = self.ws_cache[key] = float(peak_of(prof, samples, cores))
        return ws

    def costs_many(self, ident: np.ndarray, samples: np.ndarray, cores: np.ndarray,
                   step_cores: np.ndarray) -> np.ndarray:
        """:meth:`cost` of op sets ``ident`` and their :meth:`working_set`, ``(len, 7)``, for
        many keys: new ones summed over their ops with numpy, per op table (the same sums
        as :meth:`cost`, added in the same order)."""
        keys = list(zip(ident.tolist(), samples.tolist(), cores.tolist(), step_cores.tolist()))
        at = np.fromiter(map(self.cws_index.get, keys, repeat(-1)), dtype=np.int64,
                         count=len(keys))
        miss = np.flatnonzero(at < 0)
        if len(miss):
            if self.t.llb.broadcast:
                wbw = np.full(len(miss), self.wbw)
            else:
                wbw = self.wbw / np.maximum(step_cores[miss], 1)
            rows = np.zeros((len(miss), 7))
            tables: dict[tuple[int, int, float], list[int]] = {}
            for j, key in enumerate(zip(samples[miss].tolist(), cores[miss].tolist(),
                                        wbw.tolist())):
                tables.setdefault(key, []).append(j)
            for (s_, k_, w_), js in tables.items():
                table = self.op_table_w(s_, k_, w_)
                ops = [self.opset_list[i].ops for i in ident[miss[js]].tolist()]
                lens = np.fromiter(map(len, ops), dtype=np.int64, count=len(ops))
                flat = np.fromiter(chain.from_iterable(ops), dtype=np.int64, count=int(lens.sum()))
                row = np.repeat(np.arange(len(ops)), lens)
                pos = np.arange(len(flat)) - np.repeat(np.cumsum(lens) - lens, lens)
                # op after op, as sum(axis=1) adds them (cumsum adds in order; pairwise sums
                # would differ in the last bit), in blocks of keys
                block = max(1, 4_000_000 // (6 * int(lens.max())))
                js_a = np.asarray(js)
                for lo in range(0, len(ops), block):
                    hi = min(lo + block, len(ops))
                    sel = (row >= lo) & (row < hi)
                    P = np.zeros((6, hi - lo, int(lens[lo:hi].max())))
                    P[:, row[sel] - lo, pos[sel]] = table[:, flat[sel]]
                    C = np.cumsum(P, axis=2)
                    rows[js_a[lo:hi], :6] = C[:, np.arange(hi - lo), lens[lo:hi] - 1].T
            rows[:, 6] = [self.working_set(*key) for key in zip(
                ident[miss].tolist(), samples[miss].tolist(), cores[miss].tolist())]
            first = self.cws_rows.extend(rows)
            at[miss] = np.arange(first, first + len(miss))
            self.cws_index.update(zip([keys[j] for j in miss.tolist()], at[miss].tolist()))
        return self.cws_rows.a[at]

    # ---- core parts, bindings, placements ----------------------------------------------------------
    def tuple_id(self, cores: tuple[int, ...]) -> int:
        i = self.tuple_ids.get(cores)
        if i is not None:
            return i
        i = self.tuple_ids[cores] = len(self.tuple_ids)
        row = np.zeros(self.n_cores)
        row[list(cores)] = 1.0
        self.members.append(row)
        n = i + 1
        if n > len(self.pair_stay):
            cap = max(16, 2 * n)
            for name in ("pair_stay", "pair_noc", "pair_hop"):
                old = getattr(self, name)
                new = np.zeros((cap, cap))
                new[:len(old), :len(old)] = old
                setattr(self, name, new)
            old_p = self.pair_port
            new_p = np.zeros((cap, cap, self.n_cores))
            new_p[:len(old_p), :len(old_p)] = old_p
            self.pair_port = new_p
            done = np.zeros((cap, cap), dtype=bool)
            done[:len(self.pair_done), :len(self.pair_done)] = self.pair_done
            self.pair_done = done
        self.tuple_list.append(cores)
        return i

    def pairs(self, sp: np.ndarray, dp: np.ndarray) -> None:
        """Compute the pairs of core parts ``(sp[k], dp[k])`` not computed yet (on demand: most
        of the parts' pairs are never met)."""
        cap = len(self.pair_done)
        new = ~self.pair_done[sp, dp]
        if not new.any():
            return
        for k in np.unique(sp[new] * cap + dp[new]).tolist():
            si, di = divmod(k, cap)
            self._pair(si, self.tuple_list[si], di, self.tuple_list[di])
            self.pair_done[si, di] = True

    def _pair(self, si: int, src: tuple[int, ...], di: int, dst: tuple[int, ...]) -> None:
        """Movement of one sample's bytes from part ``src`` (in L1) to part ``dst``."""
        stay = noc = hop = 0.0
        port = [0.0] * self.n_cores  # Python floats: the same sums as numpy's, faster here
        hops = self.hops_list
        for i, j, frac in _slice_shape(len(src), len(dst)):  # = slices(src, dst)
            a, b = src[i], dst[j]
            if a == b:
                stay += frac
                continue
            noc += frac
            hop += frac * hops[a][b]
            port[a] += frac
            port[b] += frac
        self.pair_port[si, di] = port
        self.pair_stay[si, di] = stay
        self.pair_noc[si, di] = noc
        self.pair_hop[si, di] = hop

    def bind_id(self, bind: tuple[tuple[int, ...], ...]) -> int:
        i = self.bind_ids.get(bind)
        if i is None:
            member = np.zeros(self.n_cores)
            for part in bind:
                for c in part:
                    member[c] += 1.0
            sizes = set(map(len, bind))
            self.b_member.append(member)
            self.b_tids.append([self.tuple_id(part) for part in bind])
            i = self.bind_ids[bind] = self.b_info.append(
                (len(bind), len(bind[0]) if len(sizes) == 1 else 0, sum(map(len, bind))))
        return i

    def bind_of(self, bind: tuple[tuple[int, ...], ...]) -> int:
        """:meth:`bind_id`, remembered by the tuple's identity too."""
        b = self.bind_id(bind)
        if len(self.bind_keep) >= _MAX_KEEP:
            self.bind_objs.clear()
            self.bind_keep.clear()
        self.bind_objs[id(bind)] = b
        self.bind_keep.append(bind)
        return b

    def place_of(self, p: Placement) -> int:
        """:meth:`place`, remembered by the object's identity too (the search space shares
        its group chunks' placements)."""
        i = self.place(p)
        if len(self.place_keep) >= _MAX_KEEP:
            self.place_ids.clear()
            self.place_keep.clear()
        self.place_ids[id(p)] = i
        self.place_keep.append(p)
        return i

    def place(self, p: Placement) -> int:
        """Index of a placement's (scope, binding)."""
        b = self.bind_objs.get(id(p.core_bind))
        if b is None:
            b = self.bind_of(p.core_bind)
        key = (p.mem_scope, b)
        i = self.place_vals.get(key)
        if i is None:
            i = self.place_vals[key] = self.p_info.append((_SCOPE_CODE[p.mem_scope], b))
        return i
