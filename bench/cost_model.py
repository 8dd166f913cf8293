"""Cost-model bench: how well each model ranks measured schedules, and what that saves.

Data (cached in ``--data-dir``, resumable; see ``bench/_data.py``): for ResNet-50
b16, BERT-base s128 b8, MobileNetV2 b16 and DeepFM b2560 on the default STCP920,
a *pool* of 1,536 candidates drawn with ``Space.sample`` (training sets, and a
512-schedule *uniform* held-out set) and a *neighbourhood* set of 512
``Space.mutate`` moves from the pool's best 5%; ResNet-101 and BERT-large
(transfer targets) get a pool of 768. Every schedule passed ``Space.precheck``
and was measured with ``sim.measure``.

Sections (``--only`` picks some):

* ``speed``: featurising 10,000 ResNet-50 candidates decoded by the space in a fresh
  process (cold tables; the same again; 10,000 mutants of good schedules, tables warm);
* ``objectives``: XGBModel's pairwise-rank vs log-throughput regression, with and
  without the roofline prior, with and without the space's encoding appended;
* ``main``: XGBModel / AnalyticalModel / RandomModel at 64, 256 and 1,024 training
  measurements, uniform and neighbourhood held-out sets (means over ``--seeds``
  draws of the training set);
* ``transfer``: a model trained on one network ranks another;
* ``rounds``: simulated tuning rounds (32 measurements each) picked by each model,
  and whether the pre-trained model (all four bench networks; ``--write-pretrained``
  ships it as ``cost_model/pretrained/stcp920.ubj``) helps the first rounds.

Run: ``.venv/bin/python bench/cost_model.py [--seeds 3] [--only main,transfer]``
(generating the data takes about half an hour on one core; later runs read the cache).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
# this file is named like the package it measures: import the package, not this script
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != BENCH]
sys.path.insert(0, str(ROOT))

from bench._data import LABELS, load_graph, measured_set  # noqa: E402
from compiler.target import Target  # noqa: E402
from cost_model import (  # noqa: E402
    AnalyticalModel,
    CostModel,
    RandomModel,
    XGBModel,
    feature_names,
    features,
)
from cost_model.metrics import pairwise_accuracy, spearman, top_k_recall  # noqa: E402

BENCH_NETS = ("resnet50", "bert_base", "mobilenet_v2", "deepfm")
TRANSFER = (("resnet50", "resnet101"), ("bert_base", "bert_large"), ("resnet50", "mobilenet_v2"))
SIZES = (64, 256, 1024)
N_TEST = 512
PRETRAINED = ROOT / "cost_model" / "pretrained" / "stcp920.ubj"


def say(*a: Any) -> None:
    print(*a, flush=True)


class Net:
    """One network's measured candidates and their features."""

    def __init__(self, name: str, args: argparse.Namespace, target: Target) -> None:
        n_pool = 1536 if name in BENCH_NETS else 768
        self.name = name
        self.graph = load_graph(name)
        self.space, samples = measured_set(name, self.graph, target, args.data_dir, n_pool, 512,
                                           log=lambda m: say(m))
        t0 = time.perf_counter()
        self.X = features(self.graph, [s.schedule for s in samples], target)
        self.feat_s = time.perf_counter() - t0
        # = features(graph, schedules, target, space) for schedules the space decoded here
        self.XS = np.hstack([self.X, np.array([s.vector for s in samples], dtype=np.float64)])
        self.names_s = feature_names(self.space)
        self.y = np.array([s.throughput for s in samples])
        kind = np.array([s.kind for s in samples])
        self.pool = np.where(kind == "pool")[0]
        self.nbhd = np.where(kind == "nbhd")[0]

    def split(self, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """(training indices, uniform held-out indices) for one draw."""
        perm = np.random.default_rng(seed).permutation(self.pool)
        test = perm[-N_TEST:] if len(perm) >= n + N_TEST else perm[n:]
        return perm[:n], test


def scores(m: CostModel, X: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    p = m.predict(X)
    return spearman(p, y), pairwise_accuracy(p, y), top_k_recall(p, y, 0.1)


MODELS: dict[str, Callable[[int], CostModel]] = {
    "XGBModel": lambda seed: XGBModel(seed=seed),
    "AnalyticalModel": lambda seed: AnalyticalModel(),
    "RandomModel": lambda seed: RandomModel(seed=seed),
}
# label -> (model factory, with the space's encoding)
OBJECTIVES: dict[str, tuple[Callable[[int], CostModel], bool]] = {
    "regression, absolute error + prior (default)": (lambda seed: XGBModel(seed=seed), False),
    "regression, squared error + prior": (lambda seed: XGBModel(loss="squared", seed=seed),
                                          False),
    "regression, absolute error + prior, no prior column": (
        lambda seed: XGBModel(prior_column=False, seed=seed), False),
    "regression, absolute error, no prior": (lambda seed: XGBModel(prior=None, seed=seed), False),
    "pairwise rank + prior": (lambda seed: XGBModel(objective="rank", seed=seed), False),
    "pairwise rank, no prior": (lambda seed: XGBModel(objective="rank", prior=None, seed=seed),
                                False),
    "default + space encoding": (lambda seed: XGBModel(seed=seed), True),
}


def evaluate(net: Net, make: Callable[[int], CostModel], n: int, seeds: int,
             encoded: bool = False) -> np.ndarray:
    """Mean over seeds of (uniform sp, pw, top10, nbhd sp, pw, top10)."""
    rows = []
    X = net.XS if encoded else net.X
    for seed in range(seeds):
        tr, te = net.split(n, seed)
        m = make(seed)
        if encoded and isinstance(m, XGBModel):
            m.feature_names = net.names_s
        m.fit(X[tr], net.y[tr])
        rows.append([*scores(m, X[te], net.y[te]), *scores(m, X[net.nbhd], net.y[net.nbhd])])
    return np.mean(rows, axis=0)


def header() -> None:
    say("| network | train | model | uniform Spearman | pairwise | top-10% | "
        "neighbourhood Spearman | pairwise | top-10% |")
    say("|---|---:|---|---:|---:|---:|---:|---:|---:|")


def row(net: str, n: Any, label: str, v: np.ndarray) -> None:
    say(f"| {net} | {n} | {label} | " + " | ".join(f"{x:.3f}" if i % 3 != 2 else f"{x:.2f}"
                                                  for i, x in enumerate(v)) + " |")


# ---- sections ------------------------------------------------------------------------------------
def section_main(nets: dict[str, Net], args: argparse.Namespace) -> None:
    say("\n## Ranking held-out schedules (means over", args.seeds, "training draws)\n")
    header()
    wins = []
    for name in BENCH_NETS:
        net = nets[name]
        for n in SIZES:
            res = {label: evaluate(net, make, n, args.seeds) for label, make in MODELS.items()}
            for label, v in res.items():
                row(LABELS[name], n, label, v)
            if n == 256:
                x = res["XGBModel"]
                beats = all(x[i] > res[o][i] for o in ("AnalyticalModel", "RandomModel")
                            for i in (0, 3))
                wins.append((name, beats, x, res["AnalyticalModel"]))
            if name == "resnet50" and n == 1024:
                x = res["XGBModel"]
                say(f"\nacceptance: ResNet-50 b16, 1,024 measurements, uniform: Spearman "
                    f"{x[0]:.3f} (>= 0.9: {x[0] >= 0.9}), top-10% recall {x[2]:.2f} "
                    f"(>= 0.6: {x[2] >= 0.6})\n")
                header()
    say("\nacceptance: at 256 measurements XGBModel beats AnalyticalModel and RandomModel "
        "(Spearman, uniform and neighbourhood):")
    for name, beats, x, a in wins:
        say(f"  {LABELS[name]}: {beats} (XGB {x[0]:.3f}/{x[3]:.3f} vs analytical "
            f"{a[0]:.3f}/{a[3]:.3f})")


def section_objectives(nets: dict[str, Net], args: argparse.Namespace) -> None:
    say("\n## XGBModel objectives\n")
    header()
    for name in BENCH_NETS:
        for n in SIZES:
            for label, (make, encoded) in OBJECTIVES.items():
                row(LABELS[name], n, label, evaluate(nets[name], make, n, args.seeds, encoded))


def fit_source(net: Net, seed: int = 0) -> XGBModel:
    tr, _ = net.split(1024, seed)
    m = XGBModel(seed=seed)
    m.fit(net.X[tr], net.y[tr])
    return m


def warm_from(m: XGBModel, **kw: Any) -> XGBModel:
    """The model through a file, as a shipped or saved model is used."""
    with tempfile.TemporaryDirectory() as d:
        m.save(Path(d) / "m.ubj")
        return XGBModel.load(Path(d) / "m.ubj", **kw)


def section_transfer(nets: dict[str, Net], args: argparse.Namespace) -> None:
    say("\n## Transfer: trained on one network (1,024 measurements), ranking another\n")
    header()
    for src, dst in TRANSFER:
        s, d = nets[src], nets[dst]
        label = f"{LABELS[src]} → {LABELS[dst]}"
        rows: dict[str, list[list[float]]] = {}
        for seed in range(args.seeds):
            _, te = d.split(256, seed)
            src_model = fit_source(s, seed)
            cands: dict[str, CostModel] = {
                "source XGB, zero-shot": src_model,
                "AnalyticalModel": AnalyticalModel(),
                "RandomModel": RandomModel(seed),
            }
            for n in (64, 256):
                tr, _ = d.split(n, seed)
                own = XGBModel(seed=seed)
                own.fit(d.X[tr], d.y[tr])
                cands[f"target-only XGB, {n}"] = own
                warm = warm_from(src_model)
                warm.fit(d.X[tr], d.y[tr])
                cands[f"source XGB + {n} target (warm start)"] = warm
            for k, m in cands.items():
                rows.setdefault(k, []).append(
                    [*scores(m, d.X[te], d.y[te]), *scores(m, d.X[d.nbhd], d.y[d.nbhd])])
        for k, v in rows.items():
            row(label, "", k, np.mean(v, axis=0))


def pretrained_model(nets: dict[str, Net], args: argparse.Namespace) -> XGBModel:
    X = np.vstack([nets[n].X[nets[n].pool] for n in BENCH_NETS])
    y = np.concatenate([nets[n].y[nets[n].pool] for n in BENCH_NETS])
    g = np.concatenate([np.full(len(nets[n].pool), i) for i, n in enumerate(BENCH_NETS)])
    m = XGBModel(seed=0, params={"max_depth": 5}, rounds=200)
    m.fit(X, y, groups=g)
    if args.write_pretrained:
        PRETRAINED.parent.mkdir(parents=True, exist_ok=True)
        m.save(PRETRAINED)
        say(f"wrote {PRETRAINED.relative_to(ROOT)} ({PRETRAINED.stat().st_size / 1024:.0f} KiB)")
    return m


def simulate_rounds(net: Net, make: Callable[[int], CostModel], seed: int, rounds: int,
                    per_round: int) -> tuple[list[float], int | None]:
    """Each round the model picks its best-scored unmeasured candidates and learns from them.

    Returns the best throughput found after each round (share of the candidate set's best)
    and the measurements needed to find a schedule within 2% of that best (None: not found).
    """
    model = make(seed)
    left = np.arange(len(net.y))
    best_all = net.y.max()
    found: list[float] = []
    seen: list[int] = []
    hit = None
    for _ in range(rounds):
        s = model.predict(net.X[left])
        pick = left[np.argsort(-s, kind="stable")[:per_round]]
        left = np.setdiff1d(left, pick)
        seen.extend(pick.tolist())
        model.update(net.X[pick], net.y[pick])
        found.append(net.y[seen].max() / best_all)
        if hit is None and found[-1] >= 0.98:
            ys = net.y[seen]
            hit = int(np.argmax(ys >= 0.98 * best_all)) + 1
    return found, hit


def section_rounds(nets: dict[str, Net], args: argparse.Namespace) -> None:
    pre = pretrained_model(nets, args)
    say("\n## Simulated tuning rounds (32 measurements per round, all measured candidates "
        "of the network as proposals)\n")
    say("best found / best candidate after rounds 1, 2, 4, 8; measurements to come within 2% "
        "of the best (mean over seeds; '>256' when not within 8 rounds)\n")
    say("| network | strategy | round 1 | round 2 | round 4 | round 8 | measurements to 98% |")
    say("|---|---|---:|---:|---:|---:|---:|")
    strategies: dict[str, Callable[[int], CostModel]] = {
        "RandomModel": lambda seed: RandomModel(seed),
        "AnalyticalModel": lambda seed: AnalyticalModel(),
        "XGBModel, cold start": lambda seed: XGBModel(seed=seed),
        "XGBModel, pre-trained": lambda seed: warm_from(pre, seed=seed),
    }
    for name in (*BENCH_NETS, "resnet101", "bert_large"):
        for label, make in strategies.items():
            if label.endswith("pre-trained") and name in BENCH_NETS:
                continue  # it was trained on these
            runs = [simulate_rounds(nets[name], make, seed, 8, 32) for seed in range(args.seeds)]
            f = np.mean([r[0] for r in runs], axis=0)
            hits = [r[1] for r in runs]
            need = (f"{np.mean([h for h in hits if h]):.0f}" if all(hits) else
                    f">256 ({sum(1 for h in hits if h)}/{len(hits)} found)")
            say(f"| {LABELS[name]} | {label} | {f[0]:.3f} | {f[1]:.3f} | {f[3]:.3f} | {f[7]:.3f} "
                f"| {need} |")


def section_speed(args: argparse.Namespace, target: Target) -> None:
    """Featurising 10,000 ResNet-50 candidates the search space decoded in the same process.

    A fresh process builds the space and decodes the candidates first (not timed; the
    decoder leaves codes of the values it shares beside each schedule, as in a tuner),
    then times ``features`` alone, in CPU time: cold (the featuriser's tables empty,
    the op sets' footprints not analysed yet), the same candidates again, and 10,000
    mutants of the best pool schedules with the tables warm.
    """
    say("\n## Featurisation speed, ResNet-50 b16 (fresh process; candidates decoded by the space "
        "beforehand, not timed)\n")
    code = f"""
import json, subprocess, sys, time
import numpy as np
sys.path.insert(0, {str(ROOT)!r})
from pathlib import Path
from bench._data import load_graph, measured_set
from compiler.target import Target
from cost_model import features
n = {args.speed_n}
g = load_graph("resnet50"); t = Target.default()
space, samples = measured_set("resnet50", g, t, Path({str(args.data_dir)!r}), 1536, 512)
pool = sorted((s for s in samples if s.kind == "pool"), key=lambda s: -s.throughput)
rng = np.random.default_rng(11)
c = time.process_time()
uniform = [space.sample(rng) for _ in range(n)]
gen_u = time.process_time() - c
elite = [space.decode(s.vector) for s in pool[: len(pool) // 20]]
c = time.process_time()
nbhd = []
for _ in range(n):
    s = elite[int(rng.integers(len(elite)))]
    for _ in range(int(rng.integers(1, 4))):
        s = space.mutate(s, rng)
    nbhd.append(s)
gen_n = time.process_time() - c
out = {{}}
for kind, ss in (("uniform, cold tables", uniform), ("the same again", uniform),
                 ("mutants of the best 5%, tables warm", nbhd)):
    load = open("/proc/loadavg").read().split()[0]
    w, c = time.perf_counter(), time.process_time()
    X = features(g, ss, t)
    wall, cpu = time.perf_counter() - w, time.process_time() - c
    out[kind] = (len(ss), wall, cpu, sum(len(s.groups) for s in ss) / len(ss),
                 sum(len(s.order) for s in ss) / len(ss), load)
out["generate"] = (gen_u, gen_n)
print(json.dumps(out))
"""
    res = json.loads(subprocess.run([sys.executable, "-c", code], check=True,
                                    capture_output=True, text=True, cwd=ROOT).stdout)
    gen_u, gen_n = res.pop("generate")
    say(f"- generating (not timed below): {args.speed_n} Space.sample {gen_u:.0f} s CPU, "
        f"{args.speed_n} Space.mutate {gen_n:.0f} s CPU")
    for kind, (n, wall, cpu, groups, steps, load) in res.items():
        say(f"- features(), {kind}: {n} candidates ({groups:.1f} groups, {steps:.0f} steps "
            f"each): {cpu:.2f} s CPU, {wall:.2f} s wall ({1e6 * cpu / n:.0f} µs CPU each; "
            f"load average {load})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", type=Path, default=ROOT / ".bench_cache" / "cost_model")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--only", default="speed,objectives,main,transfer,rounds")
    ap.add_argument("--speed-n", type=int, default=10_000)
    ap.add_argument("--write-pretrained", action="store_true")
    args = ap.parse_args()
    only = set(args.only.split(","))
    target = Target.default()
    if "speed" in only:
        section_speed(args, target)
    names = list(BENCH_NETS)
    if only & {"transfer", "rounds"}:
        names += ["resnet101", "bert_large"]
    if only & {"objectives", "main", "transfer", "rounds"}:
        say("\n## Data\n")
        say("| network | pool | neighbourhood | throughput min / median / max (samples/s) | "
            "featurise (s) |")
        say("|---|---:|---:|---|---:|")
        nets = {}
        for name in names:
            net = nets[name] = Net(name, args, target)
            q = np.percentile(net.y[net.pool], [0, 50, 100])
            say(f"| {LABELS[name]} | {len(net.pool)} | {len(net.nbhd)} | "
                f"{q[0]:,.0f} / {q[1]:,.0f} / {q[2]:,.0f} (neighbourhood max "
                f"{net.y[net.nbhd].max():,.0f}) | {net.feat_s:.1f} |")
        if "objectives" in only:
            section_objectives(nets, args)
        if "main" in only:
            section_main(nets, args)
        if "transfer" in only:
            section_transfer(nets, args)
        if "rounds" in only:
            section_rounds(nets, args)


if __name__ == "__main__":
    main()
