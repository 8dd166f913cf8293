"""The object walk: schedules without codes, looked up value by value; rows into features.

A layer of :class:`cost_model._features._Featuriser` (see :mod:`cost_model._feature_tables`):
:meth:`_ObjectWalk._walk` is the reference path; both it and the coded gather end in
:meth:`_ObjectWalk._aggregate` and :meth:`_ObjectWalk._fill`.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from typing import TYPE_CHECKING

import numpy as np

from cost_model._feature_groups import _GroupTables
from cost_model._feature_set import _INDEX, FEATURES
from cost_model._feature_tables import (
    _E,
    _E_MAX,
    _EI,
    _G,
    _G_MAX,
    _GI,
    _ORDER,
    _ORDER_NAMES,
    _misc,
    _Walked,
)

if TYPE_CHECKING:
    from compiler.schedule import GraphSchedule


class _ObjectWalk(_GroupTables):
    """Walk schedules' objects; sum table rows into feature rows."""

    # ---- schedules ----------------------------------------------------------------------------
    def _walk(self, schedules: Sequence[GraphSchedule]) -> _Walked:
        """Group and edge rows of ``schedules``, walking their objects (the reference path)."""
        n = len(schedules)
        gids: list[int] = []
        eids: list[int] = []
        e_slot: list[int] = []  # position in gids of each edge's consumer
        g_off = np.zeros(n, dtype=np.int64)
        e_off = np.zeros(n, dtype=np.int64)
        n_tr = np.zeros(n)
        group_get, edge_get = self.group_obj_ids.get, self.edge_ids.get
        ops_get = self.ops_ids.get
        g_info = self.g_info
        for k, s in enumerate(schedules):
            g_off[k] = len(gids)
            e_off[k] = len(eids)
            base = len(gids)
            prod: dict[str, tuple[int, int]] = {}
            for gr in s.groups:
                info = ops_get(id(gr.ops)) or self.opset_of(gr.ops)
                i = group_get((info.ident, *map(id, gr.chunks)))
                if i is None:
                    i = self.group_of(gr, info)
                gids.append(i)
                prod[info.out] = (i, gr.split)
            xfer = self.transfer_layouts(s) if s.transfers else {}
            for pos, gr in enumerate(s.groups):
                i = gids[base + pos]
                split = gr.split
                for t, ti, streams in g_info[i].edges:
                    pid, psplit = prod.get(t, (-1, 1))
                    mid = xfer.get((t, split), -1) if psplit != split else -1
                    ekey = (pid, i, ti, mid)
                    e = edge_get(ekey)
                    if e is None:
                        e = self.new_edge(ekey, streams)
                    eids.append(e)
                    e_slot.append(base + pos)
            n_tr[k] = len(s.transfers)
        # interleave: consecutive steps of different groups or transfers, within each schedule
        n_steps = np.fromiter(map(len, map(_ORDER, schedules)), dtype=np.int64, count=n)
        names = list(chain.from_iterable(map(_ORDER_NAMES, schedules)))
        differ = np.fromiter(map(str.__ne__, names, names[1:]), dtype=np.float64,
                             count=max(len(names) - 1, 0))
        misc = _misc(n_steps, n_tr, differ)
        return (np.asarray(gids, dtype=np.int64), g_off, np.asarray(eids, dtype=np.int64), e_off,
                np.asarray(e_slot, dtype=np.int64), misc)

    def _aggregate(self, gi: np.ndarray, g_off: np.ndarray, ei: np.ndarray, e_off: np.ndarray,
                   es: np.ndarray, misc: np.ndarray) -> np.ndarray:
        """Feature rows from the group and edge rows of each schedule (flushed)."""
        n = len(g_off)
        out = np.zeros((n, len(FEATURES)))
        nc, ng = self.n_cores, len(_G)
        rows = self.g_rows.a[gi, :ng + 2 * nc]  # the L1 results per core are for edges only
        total = np.add.reduceat(rows, g_off, axis=0)
        G = total[:, :ng]
        busy = total[:, ng:ng + nc]
        port = total[:, ng + nc:ng + 2 * nc]
        Gmax = np.maximum.reduceat(rows[:, _G_MAX], g_off, axis=0)
        n_groups = np.diff(np.append(g_off, len(gi)))
        E = np.zeros((n, len(_E)))
        Emax = np.zeros((n, len(_E_MAX)))
        has = np.diff(np.append(e_off, len(ei))) > 0
        # each group's own roofline: its compute and the traffic of its chunks and inputs
        tg = self.t
        g_ddr = rows[:, _GI["ddr_w"]] + rows[:, _GI["ddr_act"]]
        g_llb = rows[:, _GI["llb"]].copy()
        g_noc = np.zeros(len(gi))
        g_port = rows[:, ng + nc:ng + 2 * nc].copy()
        g_ddr_st = np.zeros(len(gi))
        g_llb_st = np.zeros(len(gi))
        if has.any():
            e_rows, e_port = self.e_rows.a[ei], self.e_port.a[ei]
            E[has] = np.add.reduceat(e_rows, e_off[has], axis=0)
            Emax[has] = np.maximum.reduceat(e_rows[:, _E_MAX], e_off[has], axis=0)
            port[has] += np.add.reduceat(e_port, e_off[has], axis=0)
            ng_ = len(gi)

            def per_group(v: np.ndarray) -> np.ndarray:
                return np.bincount(es, weights=v, minlength=ng_)

            g_ddr += per_group(e_rows[:, _EI["ddr"]])
            g_llb += per_group(e_rows[:, _EI["llb"]])
            g_noc += per_group(e_rows[:, _EI["noc"]])
            for c in range(nc):
                g_port[:, c] += per_group(e_port[:, c])
            g_ddr_st += per_group(e_rows[:, _EI["ddr_staged"]])
            g_llb_st += per_group(e_rows[:, _EI["llb_staged"]])
        g_time = np.max([rows[:, _GI["critical"]], g_ddr / tg.ddr.bytes_per_cycle,
                         g_llb / tg.llb.bytes_per_cycle, g_noc / tg.noc.link_bytes_per_cycle,
                         g_port.max(1) / tg.dma.core_bytes_per_cycle], axis=0)
        staged = np.max([g_ddr_st / tg.ddr.bytes_per_cycle, g_llb_st / tg.llb.bytes_per_cycle,
                         g_noc / tg.noc.link_bytes_per_cycle], axis=0)
        streamed = np.max([rows[:, _GI["critical"]],
                           (g_ddr - g_ddr_st) / tg.ddr.bytes_per_cycle,
                           (g_llb - g_llb_st) / tg.llb.bytes_per_cycle], axis=0)
        misc = np.hstack([misc, np.add.reduceat(g_time, g_off)[:, None],
                          np.add.reduceat(staged + streamed, g_off)[:, None],
                          np.add.reduceat(staged, g_off)[:, None]])
        self._fill(out, G, Gmax, busy, port, E, Emax, n_groups, misc)
        return out

    def _fill(self, out: np.ndarray, G: np.ndarray, Gmax: np.ndarray, busy: np.ndarray,
              port: np.ndarray, E: np.ndarray, Emax: np.ndarray, n_groups: np.ndarray,
              misc: np.ndarray) -> None:
        t, ref = self.t, self.ref
        ddr_bw, llb_bw = t.ddr.bytes_per_cycle, t.llb.bytes_per_cycle

        def col(name: str, values: np.ndarray) -> None:
            out[:, _INDEX[name]] = values

        def gcol(name: str) -> np.ndarray:
            return G[:, _GI[name]]

        def ecol(name: str) -> np.ndarray:
            return E[:, _EI[name]]

        chunks = np.maximum(gcol("chunks"), 1)
        mme = gcol("mme")
        col("mme_cycles", mme / ref)
        col("mme_useful_cycles", gcol("useful") / ref)
        col("mme_pad_waste", np.where(mme > 0, 1.0 - gcol("useful") / np.maximum(mme, 1e-9), 0.0))
        col("vme_cycles", gcol("vme") / ref)
        col("move_cycles", gcol("move") / ref)
        col("weight_bound_cycles", gcol("wbound") / ref)
        col("compute_serial", gcol("serial") / ref)
        col("compute_group_critical", gcol("critical") / ref)
        bmax, bmean = busy.max(axis=1), busy.mean(axis=1)
        col("core_busy_max", bmax / ref)
        col("core_busy_mean", bmean / ref)
        col("core_imbalance", bmax / np.maximum(bmean, 1e-9))
        ddr_act = gcol("ddr_act") + ecol("ddr") + self.io_ddr
        col("ddr_cycles", (gcol("ddr_w") + ddr_act) / ddr_bw / ref)
        col("ddr_weight_cycles", gcol("ddr_w") / ddr_bw / ref)
        col("ddr_act_cycles", ddr_act / ddr_bw / ref)
        col("llb_cycles", (gcol("llb") + ecol("llb")) / llb_bw / ref)
        col("noc_cycles", ecol("noc") / t.noc.link_bytes_per_cycle / ref)
        col("noc_hops", ecol("hop_bytes") / np.maximum(ecol("noc"), 1e-9))
        col("port_max_cycles", port.max(axis=1) / t.dma.core_bytes_per_cycle / ref)
        col("weight_reload", gcol("ddr_w") / self.model_weights)
        col("l1_reuse", ecol("stay") / np.maximum(ecol("read"), 1e-9))
        outs = np.maximum(gcol("out_l1") + gcol("out_llb") + gcol("out_ddr"), 1e-9)
        col("act_l1_share", gcol("out_l1") / outs)
        col("act_llb_share", gcol("out_llb") / outs)
        col("act_ddr_share", gcol("out_ddr") / outs)
        steps = np.maximum(misc[:, 0], 1)
        col("steps_log2", np.log2(steps))
        col("groups_per_op", n_groups / max(len(self.g.ops), 1))
        col("chunks_mean_log2", np.log2(np.maximum(gcol("split_ops") / np.maximum(gcol("ops"), 1), 1)))
        col("chunks_max_log2", np.log2(np.maximum(Gmax[:, 1], 1)))
        col("transfers_per_step", misc[:, 1] / steps)
        col("step_overhead_cycles", steps * (t.dma.setup_cycles + t.ddr.latency_cycles) / ref)
        col("cores_per_step", gcol("cores") / chunks / self.n_cores)
        col("cores_per_part", gcol("cpp") / chunks / self.n_cores)
        col("samples_per_core", gcol("spc") / chunks / self.batch)
        col("interleave", misc[:, 2])
        col("group_roofline_cycles", misc[:, 3] / ref)
        col("group_staged_cycles", misc[:, 4] / ref)
        col("staged_load_cycles", misc[:, 5] / ref)
        col("ws_peak_l1", Gmax[:, 0] / t.l1.data_bytes)
        col("l1_peak_est", Emax[:, 0] / t.l1.data_bytes)
        col("llb_peak_est", Emax[:, 1] / t.llb.bytes)
