"""Benchmark: how fast ``logs.Database.load`` reads a large tuning log.

Generates ``--n`` records (default 1,000,000) spread over ``--workloads``
workloads and ``--targets`` targets, about 10 % failed, with schedules of a
realistic size (ResNet-like: a dozen groups, several chunks each), writes them
to a temporary file, then times ``Database.load`` and prints records/s and
the process's peak RSS. ``--full`` also times ``read_records`` (which decodes
every schedule) and ``--writer N`` times ``RecordWriter`` on N records.

Usage:
    .venv/bin/python bench/logs_load.py            # 1M records
    .venv/bin/python bench/logs_load.py --n 50000  # quick
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from logs import (
    Database,
    Provenance,
    Record,
    RecordWriter,
    Result,
    Status,
    TargetKey,
    WorkloadInfo,
    read_records,
)


def _schedule(rng: random.Random, batch: int) -> dict[str, object]:
    groups = []
    start = 0
    for _ in range(rng.randint(8, 14)):
        end = start + rng.randint(3, 12)
        split = rng.choice([1, 2, 4, 8])
        groups.append(
            {
                "ops": [start, end],
                "split": split,
                "chunks": [
                    {"scope": rng.choice(["L1", "LLB", "DDR"]), "cores": [c, (c + 1) % 8]}
                    for c in range(split)
                ],
            }
        )
        start = end
    order = [[g, c] for g, grp in enumerate(groups) for c in range(int(grp["split"]))]  # type: ignore[call-overload]
    return {"v": "1.0", "batch": batch, "groups": groups, "order": order}


def _records(n: int, workloads: int, targets: int, seed: int) -> list[Record]:
    """A pool of distinct records; the file cycles through it with fresh results."""
    rng = random.Random(seed)
    works = [
        WorkloadInfo(f"{rng.getrandbits(64):016x}", f"model{i}", {"data": (b, 3, 224, 224)}, b)
        for i, b in ((i, rng.choice([1, 8, 16])) for i in range(workloads))
    ]
    tgts = [TargetKey("STCP920", f"{rng.getrandbits(32):08x}") for _ in range(targets)]
    pool = []
    for i in range(min(n, 20000)):
        work = works[i % workloads]
        failed = rng.random() < 0.1
        result = (
            Result(Status.CAPACITY, error="L1 of core 3 overflows at step 7: needs 1.3 MiB")
            if failed
            else Result(Status.OK, latency_us=rng.uniform(500, 5000), throughput_per_s=1e4)
        )
        prov = Provenance("sim", "0.1.0", "optuna-tpe", work.model, i, 1.76e9 + i, "node-1")
        pool.append(Record(work, tgts[i % targets], _schedule(rng, work.batch), result, prov))
    return pool


def _generate(path: Path, n: int, workloads: int, targets: int, seed: int) -> None:
    pool = [r.to_line().encode() for r in _records(n, workloads, targets, seed)]
    with open(path, "wb", buffering=1 << 20) as f:
        for i in range(n):
            f.write(pool[i % len(pool)])


def _peak_rss_mib() -> float:
    # VmHWM is this process image's own peak; ru_maxrss survives fork+exec on Linux.
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _time_load(path: Path, top_k: int) -> None:
    size = path.stat().st_size
    rss_before = _peak_rss_mib()
    t0 = time.perf_counter()
    db = Database.load(path, top_k=top_k)
    seconds = time.perf_counter() - t0
    print(
        f"Database.load: {len(db):,} records in {seconds:.2f} s = "
        f"{len(db) / seconds:,.0f} records/s ({size / 2**20 / seconds:,.0f} MiB/s), "
        f"{len(db.keys())} (workload, target) keys; peak RSS {_peak_rss_mib():,.0f} MiB "
        f"(interpreter and imports before loading: {rss_before:,.0f} MiB)",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="records to generate")
    parser.add_argument("--workloads", type=int, default=200)
    parser.add_argument("--targets", type=int, default=2)
    parser.add_argument("--top-k", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--full", action="store_true", help="also time read_records")
    parser.add_argument("--writer", type=int, default=0, help="time RecordWriter on N records")
    parser.add_argument("--load-only", metavar="FILE", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.load_only:
        _time_load(Path(args.load_only), args.top_k)
        return 0

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.jsonl"
        t0 = time.perf_counter()
        _generate(path, args.n, args.workloads, args.targets, args.seed)
        size = path.stat().st_size
        print(
            f"generated {args.n:,} records, {size / 2**20:,.0f} MiB "
            f"({size / args.n:,.0f} B/record) in {time.perf_counter() - t0:.1f} s"
        )
        # Load in a fresh process so its peak RSS is the load's alone.
        load = [sys.executable, __file__, "--load-only", str(path), "--top-k", str(args.top_k)]
        subprocess.run(load, check=True)
        if args.full:
            t0 = time.perf_counter()
            count = sum(1 for _ in read_records(path))
            seconds = time.perf_counter() - t0
            print(
                f"read_records (decodes every schedule): {count:,} in {seconds:.2f} s = "
                f"{count / seconds:,.0f} records/s"
            )
        if args.writer:
            pool = _records(args.writer, args.workloads, args.targets, args.seed)
            out = Path(tmp) / "written.jsonl"
            t0 = time.perf_counter()
            with RecordWriter(out) as writer:
                for i in range(args.writer):
                    writer.write(pool[i % len(pool)])
            seconds = time.perf_counter() - t0
            print(f"RecordWriter: {args.writer:,} records in {seconds:.2f} s = "
                  f"{args.writer / seconds:,.0f} records/s")
            os.unlink(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
