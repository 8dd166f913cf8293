"""The decoder's first-time work (issue 20): decode + precheck of new vectors vs the same again.

Usage: PYTHONPATH=. python bench/space_fresh.py [--models resnet50,bert_large] [--count 200]

Per model, one space: 100 sampled candidates to warm it, then ``count`` new vectors decoded
and pre-checked ("fresh": new op sets, shapes, transfers...), then the same vectors twice
more ("re-decoded": what the caches answer). CPU ms per candidate; the first-time share is
(fresh - best re-decoded) / fresh. Run beside another checkout for a side-by-side figure.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from bench.space import MODELS, _graph
from compiler.memo import search_gc
from compiler.target import Target
from search_space import build_space


def fresh_vs_again(name: str, count: int) -> dict[str, object]:
    space = build_space(_graph(name), Target.default())
    rng = np.random.default_rng(1)
    with search_gc():
        for _ in range(100):
            space.precheck(space.sample(rng))
        vecs = [space.sample_vectors(rng, 1)[0] for _ in range(count)]
        ms = []
        for _ in range(3):
            c = time.process_time()
            for v in vecs:
                space.precheck(space._decode_free(v)[0])
            ms.append(1e3 * (time.process_time() - c) / count)
    again = min(ms[1:])
    return {"model": name, "fresh_cpu_ms": round(ms[0], 3),
            "again_cpu_ms": [round(x, 3) for x in ms[1:]],
            "first_time_share": round((ms[0] - again) / ms[0], 3),
            "load": [round(x, 2) for x in os.getloadavg()]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet50,bert_large")
    ap.add_argument("--count", type=int, default=200)
    args = ap.parse_args()
    for name in args.models.split(","):
        if name not in MODELS:
            raise SystemExit(f"space_fresh: error: unknown model {name!r} ({', '.join(MODELS)})")
        print(json.dumps(fresh_vs_again(name, args.count)), flush=True)


if __name__ == "__main__":
    main()
