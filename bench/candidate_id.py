"""``candidate_id`` per schedule: the sha256 of ``repr(structural_key())`` (before issue 20)
vs the same text built from the schedule's codes (:func:`compiler.key_text.key_text`).

Per model: ``--count`` sampled schedules and as many mutated children, decoded first;
then, in blocks of 20 so load changes hit both alike, the old id (the plain repr) and
the new one (its first call on each schedule: nothing remembered yet) of the same
schedules, in CPU time; every pair of ids must be equal. Also ``mutate`` per child
(its "is the child its parent?" check now reads the same text).

Run: ``.venv/bin/python bench/candidate_id.py [--models resnet50,bert_large,gpt1]
[--count 100]``
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autotune.sampling._studies import candidate_id  # noqa: E402
from compiler import zoo  # noqa: E402
from compiler.key_text import _MEMO_KEY as key_text_memo  # noqa: E402
from compiler.memo import peek_memo  # noqa: E402
from compiler.model import Model  # noqa: E402
from compiler.target import Target  # noqa: E402
from search_space import build_space  # noqa: E402

MODELS: dict[str, tuple[str, int, dict[str, int]]] = {
    "resnet50": ("resnet50", 16, {}),
    "bert_large": ("bert_large", 8, {"seq": 128}),
    "bert_base": ("bert_base", 8, {"seq": 128}),
    "gpt1": ("gpt", 4, {"num_layers": 1}),
}


def old_id(s: object) -> str:
    return hashlib.sha256(repr(s.structural_key()).encode()).hexdigest()[:20]  # type: ignore[attr-defined]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--models", default="resnet50,bert_large,gpt1")
    ap.add_argument("--count", type=int, default=100)
    args = ap.parse_args(argv)
    target = Target.default()
    print(f"load average {os.getloadavg()}")
    print("| model | schedules | groups | transfers | steps | old id ms | new id ms | "
          "old / new |")
    print("|---|---|---|---|---|---|---|---|")
    for key in args.models.split(","):
        name, batch, opts = MODELS[key]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            graph = Model(zoo.build(name, batch=batch, weights="inputs", **opts), name=key).graph
        space = build_space(graph, target, batch)
        rng = np.random.default_rng(0)
        samples = [space.sample(rng) for _ in range(args.count)]
        children = [space.mutate(s, rng) for s in samples]
        schedules = samples + children
        for s in schedules:  # mutate read (and remembered) the texts: forget them
            memo = peek_memo(s)
            if memo is not None:
                memo.pop(key_text_memo, None)
        old = new = 0.0
        for i in range(0, len(schedules), 20):
            block = schedules[i:i + 20]
            c0 = time.process_time()
            a = [old_id(s) for s in block]
            c1 = time.process_time()
            b = [candidate_id(s) for s in block]
            c2 = time.process_time()
            assert a == b, key
            old += c1 - c0
            new += c2 - c1
        n = len(schedules)
        print(f"| {key} | {n} | {np.mean([len(s.groups) for s in schedules]):.0f} | "
              f"{np.mean([len(s.transfers) for s in schedules]):.0f} | "
              f"{np.mean([len(s.order) for s in schedules]):.0f} | {1e3 * old / n:.3f} | "
              f"{1e3 * new / n:.3f} | {old / new:.1f}x |", flush=True)
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
