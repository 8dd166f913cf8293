"""A worker's measure path on a real tune's picks: parsed from JSON vs the object bred.

A measurer worker gets a batch as schedule JSON. When it bred the picks itself it
measures the objects its breeding built (``Breeder.take``), whose pre-check already
planned their memory, instead of copies parsed from the JSON and planned again. This
bench takes the guided sampler's picks from a tuning log, rebuilds each as breeding
does (decode its vector, pre-check it), warms the graph's memos on copies of them, then
measures the batch both ways in one process (``measure_json`` without and with
``held``): CPU ms per measurement each way, and a check that the measurements are the
same.

Run: ``.venv/bin/python bench/measure_path.py --model resnet50 --log tune.jsonl [--n 150]``
(a log of that model at that batch, e.g. from ``bench/tune_quality.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _tuning import MODELS, zoo_graph  # noqa: E402

from autotune.measure._measurer import SimMeasurer, measure_json  # noqa: E402
from compiler.memo import search_gc  # noqa: E402
from compiler.schedule import GraphSchedule  # noqa: E402
from compiler.target import Target  # noqa: E402
from search_space import build_space  # noqa: E402
from sim import measure  # noqa: E402


def guided_picks(log: Path) -> list[dict]:
    """The schedule JSON of the guided sampler's picks in a tuning log, in its order."""
    rows = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return [r["schedule"] for r in rows if r["prov"].get("tuner") == "graphtune-guided"]


def bred_picks(space: Any, picks: list[dict]) -> list[GraphSchedule]:
    """Each pick rebuilt as breeding builds it: its vector decoded, then pre-checked (what
    breeding does to a pick before it is sent); picks outside the space are left out."""
    bred = []
    for obj in picks:
        vector = space.project(GraphSchedule.from_json(obj)).vector
        if vector is None:
            continue
        s = space.decode(vector)
        space.precheck(s)
        bred.append(s)
    return bred


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--model", default="resnet50", choices=sorted(MODELS))
    ap.add_argument("--log", type=Path, required=True)
    ap.add_argument("--n", type=int, default=150, help="the last N guided picks of the log")
    args = ap.parse_args(argv)
    graph, target = zoo_graph(args.model), Target.default()
    space = build_space(graph, target, graph.batch)
    with search_gc():
        bred = bred_picks(space, guided_picks(args.log)[-args.n:])
        sent = [s.to_json() for s in bred]
        measure(graph, [GraphSchedule.from_json(j) for j in sent], target)  # warm the memos
        out = {}
        for name, held in (("parsed", None), ("held", bred)):
            c0 = time.process_time()
            out[name] = measure_json(SimMeasurer(), graph, sent, target, None, held)[1]
            ms = 1e3 * (time.process_time() - c0) / len(bred)
            print(f"{args.model}: {name:6s} {ms:7.3f} CPU ms per measurement", flush=True)
    same = ([dict(m, seconds=0) for m in out["parsed"]]
            == [dict(m, seconds=0) for m in out["held"]])
    print(f"{args.model}: {len(bred)} picks, measurements identical: {same}; load "
          f"{os.getloadavg()[0]:.1f}")
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
