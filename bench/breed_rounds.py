"""A tune's breeding rounds, recorded once and replayed alone (issue 20: breeding per decoded candidate).

``record`` runs an in-process tune (``--workers 0``, seeded) with
:func:`autotune.sampling._breed.breed` wrapped to keep each round's request and a snapshot of
the cost model as it was (``ranker.snapshot()``), and pickles them with the task's graph and
target. ``replay`` builds the space again, breeds the first ``--warm`` rounds (memos and imports
warm, as a worker's are after its first rounds) and then ``--rounds`` more, and prints the
candidates those decoded. ``--split`` adds the ``process_time`` of the timed rounds by stage
(decode = ``Space.sample/mutate/crossover/decode`` and the polish neighbours' decode,
``candidate_id``, the scorer's features and predictions, the pre-check, and the rest), and
the young-generation GC time (``gc.callbacks``).

The load-independent figure is callgrind's: run ``replay`` with ``--rounds 0`` and with
``--rounds R`` under ``valgrind --tool=callgrind`` and divide the difference of the two totals by
the candidates the R rounds decoded (``bench/breed_cg.sh`` does that).

Run:
    PYTHONPATH=. python bench/breed_rounds.py record bert_base /tmp/x/bert.pkl --trials 200
    PYTHONPATH=. python bench/breed_rounds.py replay /tmp/x/bert.pkl --warm 3 --rounds 10 [--split]
"""

from __future__ import annotations

import argparse
import gc
import os
import pickle
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# the tree on PYTHONPATH first (to replay another tree's code), this one after it; not this
# directory (bench/cost_model.py would stand for the package)
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.append(str(Path(__file__).resolve().parents[1]))

MODELS = {"bert_base": 8, "resnet50": 16, "bert_large": 8, "mobilenet_v2": 16, "gpt1": 8}


def record(model: str, out: str, trials: int, seed: int) -> None:
    """Tune ``model`` in-process for ``trials`` and pickle every breeding round."""
    from autotune import cli
    from autotune.sampling import _breed

    rounds: list[tuple[Any, Any]] = []
    where: dict[str, Any] = {}
    real = _breed.breed

    def kept(space: Any, scorer: Any, req: Any) -> Any:
        # what a remote pool sends (``MeasurePool.remote``): the model's snapshot, which
        # features schedules of the worker's own graph (pickling the in-process
        # RankerScorer would carry a copy of the graph per round, and a cold featuriser)
        inner = getattr(scorer, "_ranker", None)
        snap = inner.snapshot() if hasattr(inner, "snapshot") else scorer
        rounds.append((req, pickle.dumps(snap)))
        where.setdefault("graph", space.graph)
        where.setdefault("target", space.target)
        where.setdefault("batch", space.batch)
        return real(space, scorer, req)

    _breed.breed = kept  # type: ignore[assignment] (what Breeder calls)
    with tempfile.TemporaryDirectory() as tmp:
        onnx = os.path.join(tmp, "m.onnx")
        cli.main.main(["zoo", model, "--batch", str(MODELS[model]), "--weights", "inputs",
                      "-o", onnx], standalone_mode=False)
        cli.main.main(["tune", onnx, "--trials", str(trials), "--workers", "0", "--seed",
                      str(seed), "--log", os.path.join(tmp, "log.jsonl")], standalone_mode=False)
    with open(out, "wb") as f:
        pickle.dump({"graph": where["graph"], "target": where["target"],
                     "batch": where["batch"], "rounds": rounds}, f)
    print(f"{len(rounds)} rounds recorded in {out}")


class _Clock:
    """``process_time`` by stage; a stage called inside another is counted in the outer one."""

    def __init__(self) -> None:
        self.t: dict[str, float] = {}
        self.depth = 0

    def wrap(self, owner: Any, name: str, stage: str) -> None:
        fn = getattr(owner, name)

        def timed(*a: Any, **k: Any) -> Any:
            if self.depth:
                return fn(*a, **k)
            self.depth += 1
            t0 = time.process_time()
            try:
                return fn(*a, **k)
            finally:
                self.t[stage] = self.t.get(stage, 0.0) + time.process_time() - t0
                self.depth -= 1

        setattr(owner, name, timed)


def replay(path: str, warm: int, rounds: int, split: bool) -> None:
    """Breed the recorded rounds ``[0, warm)`` untimed, then ``[warm, warm + rounds)``."""
    from compiler.memo import search_gc
    from search_space import build_space

    with open(path, "rb") as f:
        rec = pickle.load(f)
    space = build_space(rec["graph"], rec["target"], rec["batch"])
    with search_gc():  # as a worker breeds
        _replay(space, rec, warm, rounds, split)


def _replay(space: Any, rec: dict[str, Any], warm: int, rounds: int, split: bool) -> None:
    from autotune.sampling import _breed

    todo = rec["rounds"][: warm + rounds]
    scorers = [pickle.loads(s) for _, s in todo]
    for (req, _), sc in zip(todo[:warm], scorers):
        _breed.breed(space, sc, req)
    clock = _Clock()
    gc_s = [0.0, 0]
    gc_t = [0.0]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            gc_t[0] = time.process_time()
        else:
            gc_s[0] += time.process_time() - gc_t[0]
            gc_s[1] += 1

    if split:
        from autotune.sampling import _polish

        sp_cls = type(space)
        for name in ("sample", "mutate", "crossover", "decode"):
            clock.wrap(sp_cls, name, "decode")
        clock.wrap(sp_cls, "precheck", "precheck")
        clock.wrap(_breed, "candidate_id", "candidate_id")
        if hasattr(_polish, "candidate_id"):
            clock.wrap(_polish, "candidate_id", "candidate_id")
        for sc in {id(s): s for s in scorers[warm:]}.values():
            clock.wrap(sc, "features", "features")
            clock.wrap(sc, "predict", "predict")
        gc.callbacks.append(on_gc)
    decoded = picks = 0
    t0 = time.process_time()
    for (req, _), sc in zip(todo[warm:], scorers[warm:]):
        bred = _breed.breed(space, sc, req)
        decoded += bred.decoded
        picks += len(bred.picks)
    total = time.process_time() - t0
    if split:
        gc.callbacks.remove(on_gc)
    print(f"rounds {len(todo) - warm} decoded {decoded} picks {picks} "
          f"(tree {Path(_breed.__file__).resolve().parents[2]})")
    if split and decoded:
        per = 1e3 * total / decoded
        print(f"cpu ms a decoded candidate: {per:.4f} (load {os.getloadavg()[0]:.2f})")
        rest = total - sum(clock.t.values())
        for k, v in [*sorted(clock.t.items()), ("rest", rest)]:
            print(f"  {k:14s} {1e3 * v / decoded:.4f}  {100 * v / total:5.1f} %")
        print(f"  gc (inside the above) {1e3 * gc_s[0] / decoded:.4f}  {100 * gc_s[0] / total:5.1f} %"
              f" in {gc_s[1]} collections")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("model", choices=sorted(MODELS))
    r.add_argument("out")
    r.add_argument("--trials", type=int, default=200)
    r.add_argument("--seed", type=int, default=0)
    p = sub.add_parser("replay")
    p.add_argument("path")
    p.add_argument("--warm", type=int, default=3)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--split", action="store_true")
    a = ap.parse_args()
    if a.cmd == "record":
        record(a.model, a.out, a.trials, a.seed)
    else:
        replay(a.path, a.warm, a.rounds, a.split)


if __name__ == "__main__":
    main()
