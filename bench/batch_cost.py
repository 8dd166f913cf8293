"""A measuring batch's cost outside the measurement: its picks sent whole or by id.

A worker breeds a round of the guided sampler (one ``_Worker``, in this process), then
measures its picks in batches of eight as the pool sends them (``RayPool.submit``): the
call's argument pickled (the driver's side of Ray's serialisation) and unpickled (the
worker's), and ``_Worker.measure_packed``. ``--mode full`` sends every pick's JSON (as
before), ``slim`` sends the picks this worker bred as their ids alone
(``autotune.running._ray_pool.slim``), ``both`` runs the two, each in a fresh process,
and prints the CPU of each. The measurements must be equal (checked).

Under ``valgrind --tool=callgrind`` run ``--mode full`` and ``--mode slim`` apart: the
setup and the breeding are the same instructions in both, so the difference of the two
totals is the difference of the batches (load-independent; CPU clocks on a shared
machine are not).

Run: ``python bench/batch_cost.py [--model bert_base] [--mode both] [--batches 4]``
"""

from __future__ import annotations

import argparse
import json
import subprocess
import pickle
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _tuning import MODELS, zoo_graph  # noqa: E402

from autotune.measure._measurer import SimMeasurer  # noqa: E402
from autotune.running._ray_pool import slim  # noqa: E402
from autotune.running._ray_worker import _Worker, pack_vectors  # noqa: E402
from autotune.sampling._breed import BreedRequest  # noqa: E402
from autotune.sampling._ranker import CostModelRanker  # noqa: E402
from compiler.target import Target  # noqa: E402


def run(model: str, mode: str, batches: int) -> tuple[float, list[tuple[str, float | None]]]:
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
    c0 = time.process_time()
    for b in range(0, min(len(picks), 8 * batches), 8):
        part = picks[b:b + 8]
        packed = ("k", [p.json for p in part], None, [p.cid for p in part],
                  pack_vectors([(graph.batch, p.vector) for p in part]))
        sent = slim(packed, range(len(part))) if mode == "slim" else packed
        _, got, _ = worker.measure_packed(pickle.loads(pickle.dumps(sent, protocol=5)))
        assert got is not None
        out += [(m["status"], m["latency_us"]) for m in got]
    return time.process_time() - c0, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="bert_base", choices=sorted(MODELS))
    ap.add_argument("--mode", default="both", choices=("full", "slim", "both"))
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--json", action="store_true", help="print one JSON line (for --mode both)")
    args = ap.parse_args()
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
    cpu, results = run(args.model, args.mode, args.batches)
    line = (f"{args.model} {args.mode}: {len(results)} measured, "
            f"{1e3 * cpu / len(results):.3f} CPU ms a measurement (pickle, unpickle, measure)")
    print(json.dumps({"line": line, "results": results}) if args.json else line)

if __name__ == "__main__":
    main()
