"""Hardware sweep: the sweep's warm start against independent cold tunes per variant.

Acceptance of issue #22, one run each:

* per model, over ``l1.data_bytes`` x ``ddr.bytes_per_cycle``: independent cold tunes
  of ``--cold-trials`` per variant (the reference), the sweep with its warm start at
  ``--sweep-trials`` per variant, and the shipped pre-trained model alone (a tune
  per variant at ``--sweep-trials``, no warm start from other variants). Reported
  per variant: the sweep's best over the cold best (goal >= 0.99 with a total of
  measurements <= 1/2 of the cold tunes'), and the measurements each run needed to
  reach 98% of the variant's best known speed (the best of all runs);
* ``--held-out``: the shipped model on models not in its corpus
  (``tools/train_pretrained.py``'s :data:`HELD_OUT`), on ``--held-out-target``: a tune
  from the shipped model against a cold tune (the roofline estimate ranks until the
  trees are trained), both without the O0-O3/plan seeds (they are often within 2% of the
  best already), measurements to get within 2% of the best any run found, on
  ``--held-out-seeds`` seeds (a run that never gets there counts as one past its budget).
  The verdict per model (the protocol of ``bench/results/sweep.md``, sixth pass: 4 seeds x
  150 measurements, the defaults; run there with 3 seeds for lack of CPU) is the shipped
  model's mean over the seeds (never = budget + 1) strictly below the cold tune's. The
  shipped model's logs are named by its file's hash and the cold logs are not (a cold tune
  does not read it), so after retraining a re-run into the same directory measures only the
  new model's tunes; ``--seed K --held-out-seeds 1`` runs seed K alone (its own logs).

Everything is in-process (``--workers 0``, deterministic with ``--seed``). Results go
to ``bench/results/sweep/`` (``results.json``, ``summary.md``).

Full acceptance run (hours on 2 cores):

    .venv/bin/python bench/sweep.py --models mobilenet_v2 resnet50 --cold-trials 400 \\
        --sweep-trials 200 --held-out

Reduced runs say so in the summary (models, image size, variants, budgets).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

OUT = ROOT / "bench" / "results" / "sweep"
HELD_OUT: dict[str, tuple[str, int, dict[str, Any]]] = {
    # full size (the default): the first proposals are not already within 2% of the best
    "resnet34_full": ("resnet34", 16, {}),
    "vit_full": ("vit", 16, {}),
    "gpt_full": ("gpt", 8, {"seq": 128}),
    "wide_and_deep_full": ("wide_and_deep", 2048, {}),
    "efficientnet_full": ("efficientnet_b0", 16, {}),
    # small: the guided sampler's first proposal is already within 2% (not discriminating)
    "resnet34": ("resnet34", 8, {"image_size": 112}),
    "vit": ("vit", 4, {"image_size": 96, "num_layers": 2}),
    "wide_and_deep": ("wide_and_deep", 512, {}),
    "gpt": ("gpt", 2, {"seq": 64, "num_layers": 2}),
}
HELD_OUT_DEFAULT = ["resnet34_full", "vit_full", "gpt_full", "efficientnet_full"]
# the held-out tunes' target: the issue's hard regime, chosen so that the first proposals are
# not already within 2% of the best (at 512K two of the four were: bench/results/sweep.md)
HELD_OUT_TARGET = "l1.data_bytes=384K ddr.bytes_per_cycle=13"


def graph_of(name: str, batch: int, options: dict[str, Any]) -> Any:
    from compiler import zoo
    from compiler.model import Model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Model(zoo.build(name, batch=batch, weights="inputs", **options), name=name).graph


def curve(log: Path, target_key: str, weights: dict[str, int]) -> list[float | None]:
    """Model latency (weighted best of each task so far) after each record of ``target_key``."""
    from logs import read_records

    best: dict[str, float] = {}
    out: list[float | None] = []
    if not log.exists():
        return out
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for rec in read_records(log):
            if str(rec.target) != target_key or rec.workload.key not in weights:
                continue
            lat = rec.result.latency_us
            if rec.result.status.value == "ok" and lat:
                k = rec.workload.key
                best[k] = min(best.get(k, float("inf")), float(lat))
            ok = len(best) == len(weights)
            out.append(sum(weights[k] * best[k] for k in weights) if ok else None)
    return out


def to_reach(c: list[float | None], ref: float, fraction: float) -> int | None:
    """Measurements until the latency is within ``ref / fraction`` (None: never)."""
    for i, v in enumerate(c):
        if v is not None and v * fraction <= ref:
            return i + 1
    return None


def run_model(name: str, batch: int, options: dict[str, Any], sets: list[str], cold_trials: int,
              sweep_trials: int, seed: int, out: Path,
              only: tuple[str, ...] = ("cold", "sweep", "pretrained"),
              screen: tuple[str, ...] = (), graft: int | None = None,
              regroup: int | None = None, kick: int | None = None,
              lend: bool = True, restart: int = 0,
              cold_rows: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """One model's runs and its table; ``cold_rows`` (:func:`cold_from`): the cold references'
    rows by variant, taken where the cold log holds nothing."""
    from autotune._tune import load_tasks
    from autotune.whatif._graft import GRAFTS
    from autotune.whatif._regroup import KICK, REGROUPS
    from autotune.whatif._sweep import sweep
    from autotune.whatif._targets import make_variants, parse_set
    from compiler.target import Target

    graph = graph_of(name, batch, options)
    tasks = load_tasks([graph])
    weights = {t.key: t.count_in(name) for t in tasks}
    variants = make_variants(Target.default(), [parse_set(s) for s in sets])
    d = out / name
    d.mkdir(parents=True, exist_ok=True)
    runs = {"cold": (cold_trials, False, False), "sweep": (sweep_trials, True, True),
            "pretrained": (sweep_trials, False, True)}
    seconds: dict[str, float] = {}
    cpu: dict[str, float] = {}
    for run, (trials, warm, pre) in runs.items():
        if run not in only:
            continue
        t0, c0 = time.time(), time.process_time()
        # the references get every variant the same budget; the sweep allocates its own
        sweep(tasks, variants, trials_per_variant=trials, log=d / f"{run}.jsonl", workers=0,
              seed=seed, warm=warm, pretrained=pre,
              allocate="adaptive" if run == "sweep" else "equal", screen=run in screen,
              graft=GRAFTS if graft is None else graft,
              regroup=REGROUPS if regroup is None else regroup, kick=KICK if kick is None else kick,
              lend=lend, restart=restart)
        seconds[run], cpu[run] = time.time() - t0, time.process_time() - c0
        print(f"{name}: {run} done in {seconds[run]:.0f} s (cpu {cpu[run]:.0f} s)", flush=True)
    rows = [row_of(v.name, {run: curve(d / f"{run}.jsonl", v.key, weights) for run in runs},
                   sweep_trials, None if cold_rows is None else cold_rows.get(v.name))
            for v in variants]
    total = {run: sum(r.get("measurements", {}).get(run, 0) for r in rows) for run in runs}
    return {"model": name, "batch": batch, "options": options, "sets": sets, "seed": seed,
            "cold_trials": cold_trials, "sweep_trials": sweep_trials, "rows": rows,
            "total_measurements": total, "seconds": seconds, "cpu_seconds": cpu}


def row_of(variant: str, curves: dict[str, list[float | None]], sweep_trials: int,
           given: dict[str, Any] | None = None) -> dict[str, Any]:
    """A variant's row of the table from each run's curve (:func:`curve`); ``given``: the cold
    reference's row of an earlier run (:func:`cold_from`), used when the cold curve is empty."""
    finals = {run: min((x for x in c if x is not None), default=None) for run, c in curves.items()}
    given = given if not curves["cold"] else None
    if given is not None:  # the cold reference of an earlier run's JSON
        finals["cold"] = given["cold_best_us"]
    known = [x for x in finals.values() if x is not None]
    if not known:
        return {"variant": variant, "infeasible": True}
    ref = min(known)
    row = {
        "variant": variant,
        "cold_best_us": finals["cold"], "sweep_best_us": finals["sweep"],
        "pretrained_best_us": finals["pretrained"],
        "sweep_vs_cold": (finals["cold"] / finals["sweep"]  # > 1: the sweep found faster
                          if finals["cold"] and finals["sweep"] else None),
        "measurements": {run: len(c) for run, c in curves.items()},
        "to_98": {run: to_reach(c, ref, 0.98) for run, c in curves.items()},
        "to_98_cold_within_sweep_budget": to_reach(curves["cold"][:sweep_trials], ref, 0.98),
        "cold_best_at_sweep_trials_us": min((x for x in curves["cold"][:sweep_trials]
                                             if x is not None), default=None),
        "best_known_us": ref,
    }
    if given is not None:
        row["measurements"]["cold"] = given["measurements"]["cold"]
        row["to_98"]["cold"] = given["to_98"]["cold"]  # against that run's best known
        row["cold_best_at_sweep_trials_us"] = given["cold_best_at_sweep_trials_us"]
        row["to_98_cold_within_sweep_budget"] = given.get("to_98_cold_within_sweep_budget")
        row["cold_from"] = True
    return row


def cold_from(path: Path, model: str) -> dict[str, dict[str, Any]]:
    """The cold references' rows, by variant name, of ``model`` in an earlier run's
    ``results.json`` (e.g. ``bench/results/sweep/r50_twentyfirst_pass_seed0.json``): a sweep-only
    run (``--runs sweep``) is compared against them without the cold logs."""
    data = json.loads(Path(path).read_text())
    for m in data["models"]:
        if m["model"] == model:
            return {r["variant"]: r for r in m["rows"]
                    if not r.get("infeasible") and r.get("cold_best_us") is not None}
    raise SystemExit(f"{path}: no results for {model}")


def reach_statistic(reach: list[int | None], trials: int) -> tuple[float, float]:
    """Mean and median measurements to within 2% over seeds, "never" (None) counting
    ``trials + 1``: the held-out protocol's statistic (``bench/results/sweep.md``)."""
    import numpy as np

    v = np.asarray([trials + 1 if r is None else r for r in reach], dtype=np.float64)
    return (float(v.mean()), float(np.median(v))) if len(v) else (float(trials + 1),) * 2


def shipped_tag() -> str:
    """8 hex digits of the shipped model file's hash ("none" without one): the shipped
    model's held-out logs are named by it, so a retrained model never resumes another's."""
    import hashlib

    import cost_model

    p = cost_model.pretrained_path()
    return hashlib.sha256(p.read_bytes()).hexdigest()[:8] if p is not None else "none"


def run_held_out(trials: int, seed: int, out: Path, models: list[str], target_set: str | None,
                 seeds: int = 1, runs: tuple[str, ...] = ("cold", "pretrained")
                 ) -> list[dict[str, Any]]:
    """Per held-out model: a tune from the shipped model against a cold tune, ``seeds`` seeds
    each (``seed``, ``seed + 1``, ...), measurements until within 2% of the best any run found.
    A run not in ``runs`` is only read from its logs (e.g. the cold tunes, when only the shipped
    model changed)."""
    from autotune._options import RunOptions, SearchOptions
    from autotune._tune import load_tasks, tune
    from autotune.whatif._targets import make_variants, parse_set
    from compiler.target import Target

    target = Target.default()
    if target_set and target_set.split():
        target = make_variants(target, [parse_set(s) for s in target_set.split()])[0].target

    rows = []
    d = out / "held_out"
    d.mkdir(parents=True, exist_ok=True)
    for name in models:
        model, batch, options = HELD_OUT[name]
        graph = graph_of(model, batch, options)
        tasks = load_tasks([graph])
        weights = {t.key: t.count_in(model) for t in tasks}
        curves: dict[str, list[list[float | None]]] = {"cold": [], "pretrained": []}
        tk = target.key
        shipped = shipped_tag()
        for k in range(seeds):
            for run, pre in (("cold", False), ("pretrained", True)):
                tag = "" if seed + k == 0 else f".s{seed + k}"  # --seed K runs seed K alone
                # a cold tune does not read the shipped model: its log is reused across models
                # (a re-run resumes it, measuring nothing); a shipped model's tune is its own
                what = run if run == "cold" else f"{run}-{shipped}"
                log = d / f"{name}.{target.name}.noseeds.{what}{tag}.jsonl"
                if run not in runs:
                    curves[run].append(curve(log, tk, weights))
                    continue
                # no seeds: O0-O3 and the plans are often within 2% of the best already, which
                # would hide what the first proposals' ranking is worth
                tune(tasks, trials=trials, log=log, target=target,
                     search=SearchOptions(seed=seed + k, pretrained=pre, seeds=False),
                     run=RunOptions(workers=0, curve=False))
                curves[run].append(curve(log, tk, weights))
        ref = min(x for cs in curves.values() for c in cs for x in c if x is not None)
        reach = {r: [to_reach(c, ref, 0.98) for c in cs] for r, cs in curves.items()}
        # a run that never got within 2% counts as one past its budget
        wins = sum((p or trials + 1) < (c or trials + 1)
                   for p, c in zip(reach["pretrained"], reach["cold"]))
        stat = {r: reach_statistic(v, trials) for r, v in reach.items()}
        rows.append({"model": name, "batch": batch, "options": options, "target": target.name,
                     "best_known_us": ref, "seeds": [seed + k for k in range(seeds)],
                     "first_over_best": {r: next((x for x in cs[0] if x is not None), 0.0) / ref
                                         for r, cs in curves.items()},
                     "to_within_2pct": {r: v[0] for r, v in reach.items()},
                     "to_within_2pct_per_seed": reach,
                     "pretrained_fewer_on_seeds": wins,
                     "shipped_model": shipped,
                     "mean_to_within_2pct": {r: v[0] for r, v in stat.items()},
                     "median_to_within_2pct": {r: v[1] for r, v in stat.items()},
                     # the protocol's verdict (bench/results/sweep.md, sixth pass)
                     "pretrained_fewer": stat["pretrained"][0] < stat["cold"][0],
                     "best_us": {r: min((x for x in cs[0] if x is not None), default=float("nan"))
                                 for r, cs in curves.items()}})
        print(f"held out {name}: {reach}", flush=True)
    return rows


def kill_test(out: Path, model: str, batch: int, options: dict[str, Any], sets: list[str],
              trials: int, seed: int, kill_at: int) -> dict[str, Any]:
    """SIGKILL ``graphtune sweep`` mid-run, re-run it, compare with an uninterrupted run.

    Both runs in-process (``--workers 0``) with one seed. Reported: candidates measured
    twice on a variant (goal 0), and whether the final tables are equal (same seed:
    identical, else within the search's noise: the best latencies' ratios).
    """
    import signal
    import subprocess

    import onnx

    from compiler import zoo

    d = out / "kill"
    d.mkdir(parents=True, exist_ok=True)
    onnx_path = d / f"{model}.onnx"
    onnx.save(zoo.build(model, batch=batch, weights="inputs", **options), str(onnx_path))
    exe = str(Path(sys.executable).parent / "graphtune")

    def cmd(log: Path, o: Path) -> list[str]:
        args = [exe, "sweep", str(onnx_path), "--trials-per-variant", str(trials), "--workers", "0",
                "--seed", str(seed), "--log", str(log), "-o", str(o), "--json"]
        for s in sets:
            args += ["--set", s]
        return args

    for f in d.glob("*.j*"):
        f.unlink()
    p = subprocess.Popen(cmd(d / "killed.jsonl", d / "killed"), stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    killed_log = d / "killed.jsonl"
    while p.poll() is None:  # kill once the log holds kill_at records (mid-variant)
        if killed_log.exists() and len(killed_log.read_bytes().splitlines()) >= kill_at:
            break
        time.sleep(0.2)
    p.send_signal(signal.SIGKILL)
    p.wait()
    before = len(killed_log.read_text().splitlines()) if killed_log.exists() else 0
    resumed = json.loads(subprocess.run(cmd(d / "killed.jsonl", d / "killed"), capture_output=True,
                                        text=True, check=True).stdout.splitlines()[-1])
    full = json.loads(subprocess.run(cmd(d / "full.jsonl", d / "full"), capture_output=True,
                                     text=True, check=True).stdout.splitlines()[-1])
    from autotune.sampling._studies import candidate_id
    from compiler.schedule import GraphSchedule

    dup = 0
    seen: set[tuple[str, str]] = set()
    for line in killed_log.read_text().splitlines():
        r = json.loads(line)
        k = (r["target"]["chip"], candidate_id(GraphSchedule.from_json(r["schedule"])))
        dup += k in seen
        seen.add(k)
    ratios = [a["best_us"] / b["best_us"] for a, b in zip(resumed["rows"], full["rows"])
              if a["best_us"] and b["best_us"]]
    same = [{k: v for k, v in r.items() if k != "measurements"} for r in resumed["rows"]] == \
        [{k: v for k, v in r.items() if k != "measurements"} for r in full["rows"]]
    res = {"model": model, "options": options, "sets": sets, "trials": trials,
           "records_at_kill": before, "kill_at": kill_at,
           "measured_twice": dup, "tables_identical": same,
           "best_ratio_resumed_over_full": ratios}
    print(f"kill test: {res}", flush=True)
    return res


def _f(x: float | None, spec: str = ",.1f") -> str:
    return "-" if x is None else format(x, spec)


def summary(results: dict[str, Any]) -> str:
    lines = ["# Hardware sweep bench (`bench/sweep.py`)", "",
             f"Command: `{results['command']}`  ", f"Load average at start: {results['load']}", ""]
    for m in results["models"]:
        lines += [f"## {m['model']} b{m['batch']} {m['options'] or ''}", "",
                  f"cold {m['cold_trials']} per variant vs sweep {m['sweep_trials']} per variant; "
                  f"total measurements: {m['total_measurements']}; wall s: "
                  + ", ".join(f"{k} {v:.0f}" for k, v in m["seconds"].items()), "",
                  "| variant | cold best µs | cold at sweep's per-variant budget | sweep best µs "
                  "| sweep / cold quality | sweep measurements | pretrained best µs "
                  "| to 98%: cold | sweep (warm) | pretrained alone |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for r in m["rows"]:
            if r.get("infeasible"):
                lines.append(f"| {r['variant']} | infeasible | | | | | | | | |")
                continue
            q = r["sweep_vs_cold"]
            t = r["to_98"]
            lines.append(f"| {r['variant']} | {_f(r['cold_best_us'])} | "
                         f"{_f(r.get('cold_best_at_sweep_trials_us'))} | {_f(r['sweep_best_us'])} | "
                         f"{_f(q, '.4f')} | {r['measurements']['sweep']} | "
                         f"{_f(r['pretrained_best_us'])} | {t['cold']} | "
                         f"{t['sweep']} | {t['pretrained']} |")
        lines.append("")
    if results.get("held_out"):
        lines += ["## Shipped model on held-out models", "",
                  "| model | target | best known µs | best cold / pretrained µs (first seed) | "
                  "1st / best: cold, pretrained | to within 2% per seed: cold | pretrained "
                  "| mean (median): cold | pretrained | pretrained fewer: on seeds | on the mean |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        fewer = 0
        for r in results["held_out"]:
            mean, med = r.get("mean_to_within_2pct", {}), r.get("median_to_within_2pct", {})
            fewer += bool(r.get("pretrained_fewer"))
            t = r.get("to_within_2pct_per_seed") or {k: [v] for k, v in r["to_within_2pct"].items()}
            b = r["best_us"]
            f = r["first_over_best"]
            lines.append(f"| {r['model']} b{r['batch']} {r['options']} | {r['target']} | "
                         f"{r['best_known_us']:,.1f} | {b['cold']:,.1f} / {b['pretrained']:,.1f} | "
                         f"{f['cold']:.3f}, {f['pretrained']:.3f} | {t['cold']} | {t['pretrained']} "
                         + "".join(f"| {mean[k]:.1f} ({med[k]:.0f}) " if k in mean else "| "
                                   for k in ("cold", "pretrained"))
                         + f"| {r.get('pretrained_fewer_on_seeds', '')} of {len(t['cold'])} "
                         f"| {'yes' if r.get('pretrained_fewer') else 'no'} |")
        lines += ["", f"Shipped model fewer on the mean (never = budget + 1): {fewer} of "
                  f"{len(results['held_out'])} (goal: >= 3 of 4)."]
    if results.get("kill"):
        k = results["kill"]
        lines += ["", "## SIGKILL mid-sweep and re-run", "",
                  f"{k['model']} {k['options']} over {k['sets']}, {k['trials']} per variant: "
                  f"killed with {k['records_at_kill']} records in the log; candidates measured "
                  f"twice: {k['measured_twice']}; final table "
                  f"identical to an uninterrupted run's: {k['tables_identical']}; best latency "
                  f"resumed / uninterrupted per row: "
                  + ", ".join(f"{x:.4f}" for x in k["best_ratio_resumed_over_full"])]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=["mobilenet_v2"])
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--set", dest="sets", action="append", default=None,
                    help="default: l1.data_bytes=384K,512K,768K,1M and ddr.bytes_per_cycle=13,27")
    ap.add_argument("--cold-trials", type=int, default=400)
    ap.add_argument("--sweep-trials", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--runs", default="cold,sweep,pretrained",
                    help="which runs to make (the others are read from their logs if present)")
    ap.add_argument("--screen", default="",
                    help="runs whose guided search breeds more per measurement "
                         "(autotune.whatif._budget.screened, e.g. 'sweep' or 'sweep,cold'; "
                         "default none: as tune does)")
    ap.add_argument("--graft", type=int, default=None,
                    help="grafts a warm variant's later chunk measures first (default: the "
                         "sweep's, autotune.whatif._graft.GRAFTS; 0: none, the sweep before it)")
    ap.add_argument("--regroup", type=int, default=None,
                    help="regroupings of its best a warm variant's later chunk measures after the "
                         "grafts (default: the sweep's, autotune.whatif._regroup.REGROUPS; 0: none)")
    ap.add_argument("--kick", type=int, default=None,
                    help="kick size of a later chunk after a chunk that left the best as it was "
                         "(default: the sweep's, autotune.whatif._regroup.KICK; 0: none)")
    ap.add_argument("--lend", type=int, choices=(0, 1), default=1,
                    help="1 (the default): a stalled variant lends its chunk to a variant it "
                         "dominates whose best is as fast (autotune.whatif._budget.lend_to); "
                         "0: each keeps its chunks (the sweep before it)")
    ap.add_argument("--restart", type=int, default=0,
                    help="after a chunk that gained < 0.01 %%, a variant's next chunk breeds from "
                         "candidates this many parameters from its best, unpolished "
                         "(autotune.whatif._budget.later_options; default 0: never)")
    ap.add_argument("--pairs", type=int, default=0,
                    help="pairs of regroupings a later chunk measures after its regroupings "
                         "(autotune.whatif._regroup.PAIRS; default 0: none)")
    ap.add_argument("--climb", type=int, default=None,
                    help="measurements of a later chunk that climb its new bests by scope moves "
                         "(autotune.whatif._climb.CLIMB; default: the sweep's; 0: none)")
    ap.add_argument("--cold-from", default=None, metavar="JSON",
                    help="an earlier run's results.json whose cold bests (and measurements) stand "
                         "in for a model's cold run where its cold log holds nothing")
    ap.add_argument("--held-out", nargs="*", default=None,
                    help="held-out models for the shipped model (no names: the four full-size)")
    ap.add_argument("--held-out-trials", type=int, default=150)
    ap.add_argument("--held-out-seeds", type=int, default=4,
                    help="seeds per held-out model and run (a single tune's count is noisy)")
    ap.add_argument("--held-out-runs", default="cold,pretrained",
                    help="which held-out tunes to make (the others are read from their logs)")
    ap.add_argument("--held-out-target", default=HELD_OUT_TARGET,
                    help="the held-out tunes' target: KEY=VALUE changes of the STCP920, separated "
                         "by spaces (default %(default)r; '' for the STCP920 itself, where O3 is "
                         "often within 2%% of the best already; the fourth pass used "
                         "l1.data_bytes=512K)")
    ap.add_argument("--kill", type=int, default=None, metavar="RECORDS",
                    help="also SIGKILL a sweep of the first model once its log holds RECORDS "
                         "records, re-run it and compare with an uninterrupted run")
    ap.add_argument("--kill-trials", type=int, default=60)
    ap.add_argument("--kill-model", default=None, help="default: the first of --models")
    ap.add_argument("-o", "--output", default=str(OUT))
    args = ap.parse_args(argv)
    sets = args.sets or ["l1.data_bytes=384K,512K,768K,1M", "ddr.bytes_per_cycle=13,27"]
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    from autotune.whatif import _budget, _climb, _regroup

    _regroup.PAIRS = args.pairs  # read by graft_seeds at each later chunk
    if args.climb is not None:
        _climb.CLIMB = args.climb  # read by climbed_chunk at each later chunk

    results: dict[str, Any] = {"command": " ".join(["bench/sweep.py", *(argv or sys.argv[1:])]),
                               "load": os.getloadavg(), "models": [],
                               "screened": {"runs": args.screen, "population": _budget.POPULATION,
                                            "generations": _budget.GENERATIONS},
                               "graft": args.graft, "regroup": args.regroup, "kick": args.kick,
                               "lend": args.lend, "restart": args.restart, "pairs": args.pairs,
                               "climb": _climb.CLIMB,
                               "cold_from": args.cold_from}
    for name in args.models:
        opts = {"image_size": args.image_size} if args.image_size != 224 else {}
        results["models"].append(run_model(name, args.batch, opts, sets, args.cold_trials,
                                           args.sweep_trials, args.seed, out,
                                           tuple(args.runs.split(",")),
                                           tuple(x for x in args.screen.split(",") if x),
                                           args.graft, args.regroup, args.kick,
                                           bool(args.lend), args.restart,
                                           cold_from(Path(args.cold_from), name)
                                           if args.cold_from else None))
        (out / "results.json").write_text(json.dumps(results, indent=1))
    if args.held_out is not None:
        results["held_out"] = run_held_out(args.held_out_trials, args.seed, out,
                                           args.held_out or HELD_OUT_DEFAULT, args.held_out_target,
                                           args.held_out_seeds,
                                           tuple(args.held_out_runs.split(",")))
    if args.kill is not None:
        name = args.kill_model or (args.models[0] if args.models else "mobilenet_v2")
        opts = {"image_size": args.image_size} if args.image_size != 224 else {}
        results["kill"] = kill_test(out, name, args.batch, opts, sets, args.kill_trials, args.seed,
                                    args.kill)
    results["load_end"] = os.getloadavg()
    (out / "results.json").write_text(json.dumps(results, indent=1))
    (out / "summary.md").write_text(summary(results))
    print(summary(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
