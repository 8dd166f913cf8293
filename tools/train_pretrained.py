"""Train the pre-trained cost model shipped in ``cost_model/pretrained/``.

Corpus: each model of :data:`CORPUS` (zoo models, each family at a small size and
at the size a tune is asked for: batch 16 at 224 px, seq 128, batch 2048) on each
target of :data:`TARGETS` (the STCP920 and variants with less L1, less DDR
bandwidth, or both): schedules drawn from the search space
(``Space.sample``, half uniform), O0-O3, then one to three ``Space.mutate`` moves
from the fastest 10% (the neighbourhood a tuner works in), each measured on the
simulator. The rows are ``cost_model.features`` of each schedule on its own
target (normalised by the target's rates and capacities) and the model is an
``XGBModel`` with the settings :data:`DEFAULT_SETTINGS` of :data:`SETTINGS` (since
2026-11-27 ``rank-d2``: pairwise ranking over the roofline prior, trees of depth 2, 100
rounds), each (model, target) its own query group, saved in XGBoost's UBJSON as
``cost_model/pretrained/xgb-<feature set id>.ubj``: a graphtune whose features
change finds no file for its id and says so until this script is run again.
Beside it, ``xgb-<feature set id>.json`` records the corpus, the row count and the
simulator's fingerprint (``autotune.sampling._simprint``): a tune from a model
trained on another simulator says so.

The models that ``bench/sweep.py`` holds out (:data:`HELD_OUT`) are never in the corpus.

Run (at the default size 264 s on an idle 2-core machine, 2,618 s on one loaded by other
jobs; 2026-11-26):

    .venv/bin/python tools/train_pretrained.py [--samples 120] [--mutants 60] [--seed 0]

``--save-rows rows.npz`` also keeps the measured corpus (x, y, groups, with the simulator
fingerprint, feature set, corpus, targets and seed they were measured with), and ``--rows rows.npz`` trains on
such a file without measuring, to try other training settings in seconds (measuring the
corpus is nearly all of the run). The model then records the rows' fingerprint and
corpus, not today's; a file of another feature set, or without them, is refused.

**How the settings were chosen** (``--select model|family``, on saved rows): the shipped
model ranks networks that are not in its corpus, so every candidate of :data:`SETTINGS`
is scored by leaving each corpus model (both its sizes, all four targets; 6 folds) or
each :data:`FAMILY` (4 folds) out, training on the rest and scoring every left-out
(network, target) group by Spearman over its fastest quarter, its worst group and top-10 %
recall (:mod:`cost_model.selection`), beside the roofline estimate. On the 6,442 rows of
measurer version 5 (2026-11-27, ``bench/results/sweep.md`` sixth pass), fastest-quarter
Spearman, leave one model out / one family out: roofline 0.765 / 0.765; the previous
shipped settings (``reg-d6``, absolute-error regression, depth 6) 0.705 / 0.627, i.e.
worse than the roofline on an unseen network; ``rank-d2`` 0.822 / 0.819 (seeds 1-2 of the
family split 0.819, 0.824), worst group 0.478 against the roofline's -0.210, top-10 % recall
0.843 / 0.825 against 0.736. Deeper ranking trees and more rounds did worse (``rank-d6``
0.775 / 0.777, ``rank-d4-r200`` 0.787 / 0.765), as did every regression setting (best
``reg-d4-mcw20-cs05`` 0.729 / 0.748). ``--settings NAME`` trains with another.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# (zoo model, batch, options)
CORPUS: list[tuple[str, int, dict[str, Any]]] = [
    ("tiny_cnn", 8, {}),
    ("resnet18", 8, {"image_size": 112}),
    ("mobilenet_v2", 8, {"image_size": 112}),
    ("bert_base", 4, {"seq": 64, "num_layers": 2}),
    ("deepfm", 512, {}),
    # the sizes a tune is asked for (batch 16 at 224 px, seq 128, batch 2048): a schedule's
    # working sets against the L1 and LLB are another regime at 1/8 of the activations, so
    # the small models alone taught orders that do not hold there (the full-size ResNet-34,
    # held out, was ranked worse than by the roofline: bench/results/sweep.md)
    ("resnet18", 16, {}),
    ("mobilenet_v2", 16, {}),
    ("bert_base", 8, {"seq": 128, "num_layers": 2}),
    ("dlrm", 2048, {}),
]
HELD_OUT = ["resnet34", "vit", "wide_and_deep", "gpt", "efficientnet_b0"]
# the family of each corpus model, for leave-one-family-out cross-validation (--select family)
FAMILY = {"tiny_cnn": "convnet", "resnet18": "convnet", "mobilenet_v2": "depthwise",
          "bert_base": "transformer", "deepfm": "recsys", "dlrm": "recsys"}
# name -> XGBModel settings; --select scores each by leaving networks out of the corpus
SETTINGS: dict[str, dict[str, Any]] = {
    # the model shipped until 2026-11-27: absolute-error regression over the roofline
    # prior, depth 6, 200 rounds (early-stopped on a random fifth of the rows)
    "reg-d6": {"rounds": 200},
    "reg-d4": {"rounds": 200, "params": {"max_depth": 4}},
    "reg-d3-mcw20": {"rounds": 200, "params": {"max_depth": 3, "min_child_weight": 20.0}},
    "reg-d4-mcw20-cs05": {"rounds": 200, "params": {"max_depth": 4, "min_child_weight": 20.0,
                                                     "colsample_bytree": 0.5}},
    "reg-d2-r100": {"rounds": 100, "params": {"max_depth": 2, "min_child_weight": 20.0}},
    "reg-d6-r50": {"rounds": 50, "validation": 0.0},
    "reg-sq-d4": {"rounds": 200, "loss": "squared", "params": {"max_depth": 4}},
    "rank-d4": {"objective": "rank", "rounds": 100, "params": {"max_depth": 4}},
    "rank-d6": {"objective": "rank", "rounds": 100},
    "rank-d3": {"objective": "rank", "rounds": 100, "params": {"max_depth": 3}},
    "rank-d3-r50": {"objective": "rank", "rounds": 50, "params": {"max_depth": 3}},
    "rank-d2": {"objective": "rank", "rounds": 100, "params": {"max_depth": 2}},
    "rank-d2-r200": {"objective": "rank", "rounds": 200, "params": {"max_depth": 2}},
    "rank-d1": {"objective": "rank", "rounds": 200, "params": {"max_depth": 1}},
    "rank-d3-mcw5": {"objective": "rank", "rounds": 100,
                     "params": {"max_depth": 3, "min_child_weight": 5.0}},
    "rank-d4-r200": {"objective": "rank", "rounds": 200, "params": {"max_depth": 4}},
    "rank-d4-mcw20-cs05": {"objective": "rank", "rounds": 100,
                           "params": {"max_depth": 4, "min_child_weight": 20.0,
                                      "colsample_bytree": 0.5}},
    # pairs among each group's top schedules only (the order a search needs)
    "rank-d4-top32": {"objective": "rank", "rounds": 100,
                      "params": {"max_depth": 4, "lambdarank_pair_method": "topk"}},
    "rank-d4-noprior-col": {"objective": "rank", "rounds": 100, "prior_column": False,
                            "params": {"max_depth": 4}},
    "reg-d4-noprior-col": {"rounds": 200, "prior_column": False, "params": {"max_depth": 4}},
}
DEFAULT_SETTINGS = "rank-d2"
# name -> changes of the default target
TARGETS: dict[str, dict[str, dict[str, Any]]] = {
    "default": {},
    "l1_half": {"l1": {"data_bytes": 512 * 1024}},
    "ddr_half": {"ddr": {"bytes_per_cycle": 13}},
    "l1_384k_ddr_half": {"l1": {"data_bytes": 384 * 1024}, "ddr": {"bytes_per_cycle": 13}},
}


def corpus_rows(model: str, batch: int, options: dict[str, Any], target: Any, samples: int,
                mutants: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Feature rows and measured throughputs of one model on one target."""
    import cost_model
    from autotune.sampling._studies import seed_schedules
    from compiler import zoo
    from compiler.model import Model
    from search_space import SpaceError, build_space
    from sim import measure

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = Model(zoo.build(model, batch=batch, weights="inputs", **options), name=model).graph
    space = build_space(graph, target, batch)
    pool = [space.sample(rng, uniform=i % 2 == 0) for i in range(samples)]
    pool += [s for _, s in seed_schedules(graph, target)]
    ms = measure(graph, pool, target)
    ok = [(s, m) for s, m in zip(pool, ms) if m.status == "ok" and m.throughput_per_s]
    ok.sort(key=lambda sm: -float(sm[1].throughput_per_s or 0.0))
    top = [s for s, _ in ok[: max(1, len(ok) // 10)]]
    near = []
    for _ in range(mutants if top else 0):
        s = top[int(rng.integers(len(top)))]
        try:
            for _k in range(int(rng.integers(1, 4))):
                s = space.mutate(s, rng)
        except SpaceError:  # a level the space does not express (e.g. its L1 scope policy)
            continue
        near.append(s)
    ms2 = measure(graph, near, target)
    ok += [(s, m) for s, m in zip(near, ms2) if m.status == "ok" and m.throughput_per_s]
    if not ok:
        return np.zeros((0, len(cost_model.feature_names()))), np.zeros(0)
    x = np.asarray(cost_model.features(graph, [s for s, _ in ok], target), dtype=np.float64)
    y = np.asarray([float(m.throughput_per_s or 0.0) for _, m in ok])
    return x, y


def make_model(settings: str, seed: int, rounds: int | None = None) -> Any:
    """An untrained ``XGBModel`` with the named :data:`SETTINGS` (``rounds`` overrides theirs)."""
    import cost_model

    kw = dict(SETTINGS[settings])
    params = {"nthread": 1, **kw.pop("params", {})}
    if rounds is not None:
        kw["rounds"] = rounds
    return cost_model.XGBModel(seed=seed, params=params, **kw)


def folds_of(groups: np.ndarray, corpus: list[str], targets: list[str], by: str) -> np.ndarray:
    """Each row's fold: its corpus model's name (``by="model"``: both sizes of a model leave
    together) or its :data:`FAMILY` (``by="family"``). A row's group is its corpus entry's
    index times the number of targets plus its target's (the order rows are measured in)."""
    from cost_model.selection import fold_labels

    fold = {}
    for g in np.unique(groups):
        model = corpus[int(g) // len(targets)].split()[0]
        fold[int(g)] = model if by == "model" else FAMILY.get(model, model)
    return fold_labels(groups, fold)


def select(x: np.ndarray, y: np.ndarray, groups: np.ndarray, corpus: list[str],
           targets: list[str], by: str, seed: int, names: list[str]) -> int:
    """Print every :data:`SETTINGS`'s cross-validated rank quality (and the roofline's)."""
    from cost_model.selection import cross_validate

    folds = folds_of(groups, corpus, targets, by)
    print(f"leave one {by} out: {len(set(folds.tolist()))} folds, {len(np.unique(groups))} "
          f"groups, {len(y)} rows")
    print("| settings | Spearman, fastest quarter | worst group | top-10% recall | Spearman | s |")
    print("|---|---:|---:|---:|---:|---:|")
    unknown = [n for n in names if n not in SETTINGS]
    if unknown:
        print(f"train_pretrained: error: unknown settings {', '.join(unknown)} (known: "
              f"{', '.join(SETTINGS)})", file=sys.stderr)
        return 2
    for name in [None, *names]:
        t0 = time.process_time()
        make = None if name is None else (lambda n=name: make_model(n, seed))
        r = cross_validate(make, x, y, groups, folds)
        print(f"| {name or 'roofline'} | {r.spearman_top:.3f} | {r.worst_top:.3f} | "
              f"{r.recall10:.3f} | {r.spearman:.3f} | {time.process_time() - t0:.0f} |",
              flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=120, help="space samples per model and target")
    ap.add_argument("--mutants", type=int, default=60, help="neighbourhood moves per model and target")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=None,
                    help="boosting rounds (default: the settings')")
    ap.add_argument("--save-rows", default=None, metavar="NPZ",
                    help="also write the corpus's rows (x, y, groups) to this .npz file")
    ap.add_argument("--rows", default=None, metavar="NPZ",
                    help="train on rows written by --save-rows instead of measuring the corpus")
    ap.add_argument("--settings", default=DEFAULT_SETTINGS, choices=sorted(SETTINGS),
                    help="training settings (default %(default)s)")
    ap.add_argument("--select", choices=("model", "family"), default=None,
                    help="instead of training: score every --settings by leaving each corpus "
                         "model (or family) out in turn, print the table and exit")
    ap.add_argument("--candidates", default=None, metavar="NAME,...",
                    help="--select scores only these settings (default: all)")
    ap.add_argument("-o", "--output", default=None,
                    help="where to save (default: cost_model/pretrained/xgb-<feature set id>.ubj)")
    args = ap.parse_args(argv)

    import cost_model
    from autotune.sampling._simprint import simulator_fingerprint
    from compiler.target import Target
    from cost_model._pretrained import pretrained_filename

    rng = np.random.default_rng(args.seed)
    base = Target.default()
    xs, ys, gs = [], [], []
    t0 = time.time()
    if args.rows:
        if not Path(args.rows).is_file():
            print(f"train_pretrained: error: no rows file {args.rows} (write one with --save-rows)",
                  file=sys.stderr)
            return 2
        saved = np.load(args.rows)  # (the corpus recorded beside the model is CORPUS's)
        if (any(k not in saved for k in ("simulator", "corpus", "targets", "seed"))
                or str(saved["feature_set"]) != cost_model.feature_set_id()):
            print(f"train_pretrained: error: {args.rows} was measured with another feature set "
                  "or does not record its simulator fingerprint, corpus and seed; measure the "
                  "corpus again (without --rows)", file=sys.stderr)
            return 2
        simulator = str(saved["simulator"])
        corpus, targets = [str(c) for c in saved["corpus"]], [str(t) for t in saved["targets"]]
        seed = int(saved["seed"])
        xs, ys, gs = [saved["x"]], [saved["y"]], [saved["groups"]]
    else:
        simulator = simulator_fingerprint()
        corpus, targets, seed = [f"{n} b{b} {o}" for n, b, o in CORPUS], list(TARGETS), args.seed
        for model, batch, options in CORPUS:
            for tname, change in TARGETS.items():
                target = base.replace(**change) if change else base
                x, y = corpus_rows(model, batch, options, target, args.samples, args.mutants, rng)
                xs.append(x)
                ys.append(y)
                gs.append(np.full(len(y), len(gs)))
                print(f"{model} b{batch} on {tname}: {len(y)} rows ({time.time() - t0:.0f} s)",
                      flush=True)
    if args.save_rows:
        np.savez_compressed(args.save_rows, x=np.vstack(xs), y=np.concatenate(ys),
                            groups=np.concatenate(gs), simulator=np.str_(simulator),
                            feature_set=np.str_(cost_model.feature_set_id()),
                            corpus=np.array(corpus), targets=np.array(targets), seed=seed)
    if args.select:
        return select(np.vstack(xs), np.concatenate(ys), np.concatenate(gs), corpus, targets,
                      args.select, args.seed,
                      args.candidates.split(",") if args.candidates else list(SETTINGS))
    m = make_model(args.settings, args.seed, args.rounds)
    m.fit(np.vstack(xs), np.concatenate(ys), np.concatenate(gs))
    out = Path(args.output) if args.output else ROOT / "cost_model" / "pretrained" / pretrained_filename()
    out.parent.mkdir(parents=True, exist_ok=True)
    m.save(out)
    info = {"feature_set": cost_model.feature_set_id(), "simulator": simulator,
            "settings": args.settings,
            "rows": int(m.n_samples), "corpus": corpus, "targets": targets, "seed": seed,
            "trained": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    out.with_suffix(".json").write_text(json.dumps(info, indent=1) + "\n")
    print(f"{out}: {out.stat().st_size / 1024:.0f} KiB, {m.n_samples} rows, "
          f"feature set {cost_model.feature_set_id()} ({time.time() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
