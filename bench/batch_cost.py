"""A measuring batch's cost outside the measurement: its picks sent whole or by id.

A worker breeds a round of the guided sampler (one ``_Worker``, in this process), then
measures its picks in batches of eight as the pool sends them (``RayPool.submit``): the
call's argument pickled (the driver's side of Ray's serialisation) and unpickled (the
worker's), and ``_Worker.measure_packed``. ``--mode full`` sends every pick's JSON (as
before), ``slim`` sends the picks this worker bred as their ids alone
(``autotune.running._ray_pool.slim``), ``both`` runs the two, each in a fresh process,
and prints the CPU of each. The measurements must be equal (checked).

For load-independent counts, ``--save F`` writes the batches as sent (both ways) and
the JSON each worker held beside its picks; ``--io F --mode full|slim`` then does only
what differs between the two ways, ten times over: the driver's pickling of each call's
argument, the worker's unpickling, and ``Breeder.take``'s comparison of a sent JSON with
the held one (full only), the collector set as in a worker (``search_gc``). Run it
under ``valgrind --tool=callgrind`` for each mode (the rest of the process is the same in
both: the difference of the counts is the batches').

``--travel dict|text [--part worker|all]``: a bred round's picks on their way from the
worker to the log, their JSON as a dict or as its log text (see :func:`travel`).

Run: ``python bench/batch_cost.py [--model bert_base] [--mode both] [--batches 4]``
"""

from __future__ import annotations

import argparse
import json
import pickle
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _tuning import MODELS, zoo_graph  # noqa: E402

from autotune.measure._measurer import SimMeasurer  # noqa: E402
from autotune.running._ray_pool import slim  # noqa: E402
from autotune.running._ray_worker import _Worker, pack_vectors  # noqa: E402
from autotune.sampling._breed import BreedRequest  # noqa: E402
from autotune.sampling._ranker import CostModelRanker  # noqa: E402
from compiler.target import Target  # noqa: E402


def io(path: str, mode: str, rounds: int = 10) -> int:
    """The serialisation and comparison of ``--save``'s batches (see the module doc)."""
    from compiler.memo import search_gc

    with open(path, "rb") as f:
        saved = pickle.load(f)
    n = 0
    with search_gc():  # the collector as in a worker (and in the driver)
        for _ in range(rounds):
            for full, thin, held in saved:
                got = pickle.loads(pickle.dumps(full if mode == "full" else thin, protocol=5))
                for made, obj in zip(held, got[1]):
                    n += obj is None or made == obj
    return n


def run(model: str, mode: str, batches: int, save: str = ""
        ) -> tuple[float, list[tuple[str, float | None]]]:
    """CPU seconds of the batches (pickling, unpickling, measuring) and their results."""
    graph = zoo_graph(model)
    target = Target.default()
    worker = _Worker(target, SimMeasurer())  # (its collector settings too, as in a worker)
    worker.load({"k": graph})
    request = BreedRequest(batch=graph.batch, parents=(), seed=0, proposals=8 * batches,
                           eps=1, seen=frozenset(), population=max(16, 8 * batches),
                           generations=1, random_share=0.25, crossover=0.15)
    bred = worker.breed("k", request, CostModelRanker(graph, target, seed=0).snapshot())
    picks = pickle.loads(pickle.dumps(bred)).picks  # as the driver holds them
    out: list[tuple[str, float | None]] = []
    saved: list[Any] = []
    c0 = time.process_time()
    for b in range(0, min(len(picks), 8 * batches), 8):
        part = picks[b:b + 8]
        packed = ("k", [p.json for p in part], None, [p.cid for p in part],
                  pack_vectors([(graph.batch, p.vector) for p in part]))
        sent = slim(packed, range(len(part))) if mode == "slim" else packed
        if save:  # the JSON each pick was bred with, as the worker holds it (its own copy)
            saved.append((packed, slim(packed, range(len(part))),
                          [pickle.loads(pickle.dumps(p.json)) for p in part]))
        _, got, _ = worker.measure_packed(pickle.loads(pickle.dumps(sent, protocol=5)))
        assert got is not None
        out += [(m["status"], m["latency_us"]) for m in got]
    if save:
        with open(save, "wb") as f:
            pickle.dump(saved, f, protocol=5)
    return time.process_time() - c0, out


def travel(model: str, mode: str, part: str, picks: int) -> int:
    """A round of ``picks`` bred picks' way from their worker to the log (``--travel``): the
    worker's making of the picks' JSON as text (``text``; ``dict``: as before) and its
    pickling of the round; with ``part`` ``all`` also the driver's unpickling and each
    pick's log line with its ``source`` set, as ``Driver._record`` writes it. Under
    callgrind (``PYTHONHASHSEED=0``: the breeding the same), ``all`` minus ``worker`` is
    the driver's count and ``text`` minus ``dict`` the change."""
    from autotune.running import _ray_worker
    from logs import Provenance, Record, Result, ScheduleText, Status, TargetKey, WorkloadInfo

    graph = zoo_graph(model)
    target = Target.default()
    if mode == "dict":
        _ray_worker.picks_as_text = lambda bred: bred  # type: ignore[assignment]
    worker = _Worker(target, SimMeasurer())
    worker.load({"k": graph})
    request = BreedRequest(batch=graph.batch, parents=(), seed=0, proposals=picks, eps=1,
                           seen=frozenset(), population=max(16, picks), generations=1,
                           random_share=0.25, crossover=0.15)
    sent = pickle.dumps(worker.breed("k", request,
                                     CostModelRanker(graph, target, seed=0).snapshot()),
                        protocol=5)
    if part == "worker":
        return len(sent)
    bred = pickle.loads(sent)
    size = 0
    for n, p in enumerate(bred.picks):
        source = f"tuner:s/{n}"
        sched = (p.json.with_source(source) if type(p.json) is ScheduleText
                 else {**p.json, "source": source})
        rec = Record(WorkloadInfo("k", model, {}, graph.batch), TargetKey("c", "h"), sched,
                     Result(Status.OK, latency_us=1.0 + n), Provenance(
                         tuner="t", study="s", trial=n, time_unix_s=1.0, params=p.params))
        size += len(rec.to_line_bytes())
    return size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="bert_base", choices=sorted(MODELS))
    ap.add_argument("--mode", default="both", choices=("full", "slim", "both"))
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--json", action="store_true",
                    help="print one JSON line (a single --mode: what --mode both runs)")
    ap.add_argument("--save", default="", help="write the batches to this file (see --io)")
    ap.add_argument("--io", default="", help="only the batches' serialisation, from --save's file")
    ap.add_argument("--travel", default="", choices=("", "dict", "text"),
                    help="only a bred round's way to the log, its picks' JSON as a dict or "
                         "as text (see travel())")
    ap.add_argument("--part", default="all", choices=("worker", "all"))
    ap.add_argument("--picks", type=int, default=16)
    args = ap.parse_args()
    if args.travel:
        c0 = time.process_time()
        size = travel(args.model, args.travel, args.part, args.picks)
        print(f"{args.travel} {args.part}: {size} bytes, {time.process_time() - c0:.2f} CPU s")
        return
    if args.io:
        if args.mode == "both":
            ap.error("--io needs --mode full or slim (one a process: a callgrind count each)")
        print(f"{args.mode}: {io(args.io, args.mode)} picks stood for their JSON")
        return
    if args.mode == "both":
        got = {}
        for mode in ("full", "slim"):
            text = subprocess.run([sys.executable, __file__, "--model", args.model, "--mode",
                                   mode, "--batches", str(args.batches), "--json"],
                                  check=True, capture_output=True, text=True).stdout
            got[mode] = json.loads(text.splitlines()[-1])
            print(got[mode]["line"], flush=True)
        assert got["full"]["results"] == got["slim"]["results"], "the measurements differ"
        print("measurements equal")
        return
    cpu, results = run(args.model, args.mode, args.batches, args.save)
    line = (f"{args.model} {args.mode}: {len(results)} measured, "
            f"{1e3 * cpu / len(results):.3f} CPU ms a measurement (pickle, unpickle, measure)")
    print(json.dumps({"line": line, "results": results}) if args.json else line)

if __name__ == "__main__":
    main()
