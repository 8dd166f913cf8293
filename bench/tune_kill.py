"""SIGKILL ``graphtune tune`` at random points, re-run, and check the log.

Kills the job (its whole process group, Ray workers included) ``--kills`` times,
each after a random number of new records plus a random delay, then runs it to
the end. Checks: every measured candidate is in the final log exactly once,
no (study, trial) pair is logged twice, the log holds ``--trials`` records, and
the best is as good as an uninterrupted run's (same seed, fresh log).

Run: ``.venv/bin/python bench/tune_kill.py [--model tiny_cnn|resnet50] [--trials 120]
[--kills 10] [--workers 0]``
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import onnx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autotune.sampling._studies import candidate_id  # noqa: E402
from compiler import zoo  # noqa: E402
from compiler.schedule import GraphSchedule  # noqa: E402


def lines(log: Path) -> int:
    return log.read_bytes().count(b"\n") if log.exists() else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny_cnn")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--trials", type=int, default=120)
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--seed", type=int, default=3)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tune_kill_"))
    model = work / f"{args.model}.onnx"
    onnx.save(zoo.build(args.model, batch=args.batch, weights="inputs"), str(model))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def cmd(log: Path) -> list[str]:
        return [sys.executable, "-m", "autotune.cli", "tune", str(model), "--trials",
                str(args.trials), "--workers", str(args.workers), "--log", str(log), "--seed",
                str(args.seed), "--json"]

    rng = random.Random(args.seed)
    log = work / "killed.jsonl"
    t0 = time.perf_counter()
    for k in range(args.kills):
        before = lines(log)
        if before >= args.trials:
            print(f"kill {k}: the job is already complete")
            break
        want = before + rng.randint(1, max(2, args.trials // (2 * args.kills)))
        proc = subprocess.Popen(cmd(log), env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        while proc.poll() is None and lines(log) < want:
            time.sleep(0.02)
        time.sleep(rng.uniform(0, 0.5))
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        print(f"kill {k}: {before} -> {lines(log)} records", flush=True)
    final = subprocess.run(cmd(log), env=env, capture_output=True, text=True)
    assert final.returncode == 0, final.stderr
    killed_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    clean_log = work / "clean.jsonl"
    clean = subprocess.run(cmd(clean_log), env=env, capture_output=True, text=True)
    assert clean.returncode == 0, clean.stderr
    clean_s = time.perf_counter() - t0

    recs = [json.loads(line) for line in log.read_text().splitlines()]
    measured = [candidate_id(GraphSchedule.from_json(r["schedule"])) for r in recs
                if r["result"]["status"] != "worker_lost"]
    per_trial = Counter((r["prov"]["study"], r["prov"]["trial"]) for r in recs)
    best = json.loads(final.stdout)["tasks"][0]["best_latency_us"]
    best_clean = json.loads(clean.stdout)["tasks"][0]["best_latency_us"]
    print(f"\nrecords {len(recs)} (want {args.trials}); measured candidates {len(measured)}, "
          f"distinct {len(set(measured))}; most records of one trial {max(per_trial.values())}")
    print(f"best after {args.kills} kills: {best:,.2f} µs in {killed_s:.0f} s; "
          f"uninterrupted: {best_clean:,.2f} µs in {clean_s:.0f} s; ratio {best_clean / best:.3f}")
    ok = (len(recs) == args.trials and len(measured) == len(set(measured))
          and max(per_trial.values()) == 1)
    print("every measured candidate exactly once:", "yes" if ok else "NO")


if __name__ == "__main__":
    main()
