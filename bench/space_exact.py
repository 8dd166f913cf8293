"""Exactness of the decoder across changes (issue 20): one line of sha256 prefixes per model.

Usage: PYTHONPATH=. python bench/space_exact.py MODEL [N]   (bench/space.py's models)

Samples N candidates (default 200; seed 7) and, after every fourth, a mutant of it and a
crossover with the one before, then hashes, over all of them: the identity text and the
pre-check verdict (``key``), the memory plan (``plan``: per step the L1 bytes per core, the
streamed inputs sorted and the held flag; the peaks; the issue), the cost model's feature
rows (``feat``, featurised before anything else reads the schedules) and the canonical
vectors (``enc``). A decoder change is exact when the line is the same before and after,
and with ``GRAPHTUNE_PURE_PYTHON=1`` (the Python decoder).
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

# run as a script, bench/ comes first on the path and its cost_model.py would shadow the package
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import numpy as np  # noqa: E402

from bench.space import _graph, build_space  # noqa: E402
from compiler.capacity import plan_memory  # noqa: E402
from compiler.key_text import key_text  # noqa: E402
from compiler.target import Target  # noqa: E402
from cost_model._features import features  # noqa: E402


def main() -> None:
    name = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    target = Target.default()
    space = build_space(_graph(name), target)
    rng = np.random.default_rng(7)
    cands = []
    for i in range(n):
        s = space.sample(rng)
        cands.append(s)
        if i % 4 == 3:
            cands.append(space.mutate(s, rng))
            cands.append(space.crossover(s, cands[-3], rng))
    graph = space.graph_for(cands[0].batch)
    rows = features(graph, cands, target)
    key, plans = hashlib.sha256(), hashlib.sha256()
    for s in cands:
        check = space.precheck(s)
        key.update(key_text(s).encode())
        key.update(repr((check.ok, check.kind, check.reason)).encode())
        plan = plan_memory(space.graph_for(s.batch), s, target)
        steps = [(st.l1_bytes, sorted(st.streamed), st.held) for st in plan.steps]
        plans.update(repr((steps, plan.peak_l1_bytes_per_core, plan.peak_llb_bytes,
                           plan.issue)).encode())
    feat = hashlib.sha256(np.ascontiguousarray(rows).tobytes()).hexdigest()[:16]
    enc = hashlib.sha256(np.ascontiguousarray(space.encode_many(cands)).tobytes()).hexdigest()[:16]
    print(name, len(cands), "key", key.hexdigest()[:16], "plan", plans.hexdigest()[:16],
          "feat", feat, "enc", enc)


if __name__ == "__main__":
    main()
