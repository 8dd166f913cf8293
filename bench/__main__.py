"""The benchmark suite: graphtune against O0-O3, the guide's plans and Optuna's samplers.

For each model of the fixed suite (ResNet-50/101 b16, MobileNetV2 b16,
BERT-base s128 b8 and s384 b2, BERT-large s128 b8, DeepFM b2560, Wide&Deep
b2048, ViT-B/16 b16, a GPT-2-small decoder s128 b8): O0-O3 and the guide's
hand-written plans that fit, simulated; then random search, Optuna TPE,
Optuna NSGA-II (``--methods`` adds ``gp`` where PyTorch is installed) and
graphtune's guided search, each with the same measurement budget, in-process
and seeded (the same command gives the same measurements). Writes
``suite.csv``, ``suite.md``, ``suite.json`` and ``curves.png``,
``speedup.png``, ``roofline.png`` to ``--out``; tuning logs go to ``--logs``.

Run: ``python -m bench [--quick] [--budget N] [--models ...] [--methods ...]
[--jobs N] [--out bench/results/suite] [--resume]`` (``make bench-tune``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shlex
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

from bench._suite import (
    EXTRA,
    METHODS,
    QUICK_BUDGET,
    QUICK_MODELS,
    SUITE,
    die_with_parent,
    run_job,
)
from bench._suite_report import build_table, write_outputs

HERE = Path(__file__).resolve().parent
DEFAULT_BUDGET = 120


def _machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{cpu}, {os.cpu_count()} logical CPUs, {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}")


def _reusable(path: Path, job: tuple[Any, ...]) -> bool:
    """A finished run file with the same budget, seed and seeding (a damaged one is not)."""
    if not path.is_file():
        return False
    try:
        run = json.loads(path.read_bytes())
    except ValueError:  # torn or not JSON (UnicodeDecodeError is a ValueError)
        return False
    if not isinstance(run, dict):
        return False
    if job[0] == "baselines":
        return True
    return (run.get("budget"), run.get("seed"), run.get("seeded")) == job[3:6]


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (the usage is in ``--help``)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def _writable_dir(path: Path, option: str) -> str:
    """Why ``path`` cannot become a directory of outputs, or "" (nothing is created)."""
    probe = path
    while not probe.exists():
        if probe.is_symlink():
            return f"{option} {path}: {probe} is a symbolic link to nothing"
        if probe.parent == probe:
            break
        probe = probe.parent
    if not probe.is_dir():
        return f"{option} {path}: {probe} is not a directory"
    try:  # permissions, read-only and pseudo file systems (/proc): try it
        tempfile.TemporaryDirectory(dir=probe).cleanup()
    except OSError as exc:
        return f"{option} {path}: cannot create a directory in {probe} ({exc.strerror or exc})"
    return ""


def _run_totals(runs: Path, jobs: list[tuple[Any, ...]]) -> dict[str, Any]:
    """Sums over the run files of the table: wall and CPU time, loads, when they finished."""
    files = [json.loads((runs / f"{_name(job)}.json").read_text()) for job in jobs]
    cpu = [f["cpu_s"] for f in files if "cpu_s" in f]
    loads = [f["load_1min"] for f in files if "load_1min" in f]
    ends = sorted(f["finished_utc"] for f in files if "finished_utc" in f)
    return {"runs": len(files), "run_wall_s": sum(f["wall_s"] for f in files),
            "cpu_s": sum(cpu), "cpu_unrecorded": len(files) - len(cpu),
            "run_load_min": min(loads, default=None), "run_load_max": max(loads, default=None),
            "first_run_end": ends[0] if ends else None, "last_run_end": ends[-1] if ends else None}


def _name(job: tuple[Any, ...]) -> str:
    return f"{job[1]}_{'baselines' if job[0] == 'baselines' else job[2]}"


def _args(argv: list[str] | None) -> argparse.Namespace:
    ap = _Parser(prog="python -m bench", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help=f"CI-sized: models {' '.join(QUICK_MODELS)}, budget {QUICK_BUDGET} "
                         "(--models and --budget override)")
    ap.add_argument("--models", nargs="+", choices=[*SUITE, *EXTRA], default=None)
    ap.add_argument("--methods", nargs="+", choices=["guided", "tpe", "gp", "nsga2", "random"],
                    default=list(METHODS))
    ap.add_argument("--budget", type=int, default=None,
                    help=f"Measurements per method and model (default {DEFAULT_BUDGET}).")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                    help="Runs at a time (processes); results do not depend on it.")
    ap.add_argument("--from-scratch", action="store_true",
                    help="Searches do not start from O0-O3 and the plans.")
    ap.add_argument("--resume", action="store_true",
                    help="Reuse finished run files in OUT/runs with the same budget and seed.")
    ap.add_argument("--report-only", action="store_true",
                    help="Run nothing: tables and plots from the run files in OUT/runs "
                         "(a search without one is shown as not run).")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "suite")
    ap.add_argument("--logs", type=Path, default=HERE / "out" / "suite")
    ap.add_argument("--readme", type=Path, default=None,
                    help="Also put the command, date, machine and summary table into this "
                         "README's suite block.")
    args = ap.parse_args(argv)
    # Runs go in the order given (cheap models first finish a partial run sooner);
    # tables follow the suite's order.
    args.run_order = args.models or list(QUICK_MODELS if args.quick else SUITE)
    args.models = [k for k in (*SUITE, *EXTRA) if k in args.run_order]
    if args.budget is None:
        args.budget = QUICK_BUDGET if args.quick else DEFAULT_BUDGET
    if args.budget < 1 or args.jobs < 1:
        ap.error("--budget and --jobs must be >= 1")
    for option, path in (("--out", args.out), ("--logs", args.logs)):
        if option == "--out" or not args.report_only:
            problem = _writable_dir(path, option)
            if problem:
                ap.error(problem)
    if args.readme is not None:
        from bench._suite_report import README_END, README_START

        try:
            text = args.readme.read_bytes().decode() if args.readme.is_file() else ""
        except (OSError, UnicodeDecodeError) as exc:
            ap.error(f"cannot read {args.readme} as a UTF-8 README: "
                     f"{getattr(exc, 'strerror', None) or type(exc).__name__}")
        if README_START not in text or README_END not in text:
            ap.error(f"{args.readme} has no {README_START} ... {README_END} block")
        if not os.access(args.readme, os.W_OK):
            ap.error(f"--readme {args.readme} is read-only")
    if "gp" in args.methods:
        from autotune.sampling._studies import check_sampler

        try:
            check_sampler("gp")
        except Exception as err:  # noqa: BLE001 - a one-line user error
            ap.error(str(err))
    return args


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    runs = args.out / "runs"
    seeded = not args.from_scratch
    jobs: list[tuple[Any, ...]] = [("baselines", k) for k in args.run_order]
    jobs += [("search", k, m, args.budget, args.seed, seeded, str(args.logs))
             for k in args.run_order for m in args.methods]
    todo = []
    for job in jobs:
        name = f"{_name(job)}.json"
        if args.report_only:
            if not (runs / name).exists() and job[0] == "baselines":
                print(f"python -m bench: error: {runs / name} is missing", file=sys.stderr)
                return 2
            if (runs / name).exists() and not _reusable(runs / name, job):
                print(f"python -m bench: error: {runs / name} has another budget or seed, or is damaged",
                      file=sys.stderr)
                return 2
        elif args.resume and _reusable(runs / name, job):
            print(f"reusing {runs / name}", flush=True)
        else:
            todo.append(job)
    load_start = os.getloadavg()[0]
    t0 = time.perf_counter()
    print(f"suite: {len(args.models)} model(s) x {len(args.methods)} method(s), budget "
          f"{args.budget}, {len(todo)} run(s), {args.jobs} at a time; load {load_start:.2f}",
          flush=True)

    def done(job: tuple[Any, ...], out: dict[str, Any]) -> None:
        what = "baselines" if job[0] == "baselines" else job[2]
        print(f"  {job[1]:16} {what:9} {out['wall_s']:7.1f} s ({out['cpu_s']:.1f} s CPU)  "
              f"({time.perf_counter() - t0:.0f} s elapsed)", flush=True)

    if args.jobs == 1:
        for job in todo:
            done(job, run_job(job, runs))
    else:
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=args.jobs, mp_context=ctx,
                                 initializer=die_with_parent) as pool, _stopped_by_sigterm():
            try:
                futures = {pool.submit(run_job, job, runs): job for job in todo}
                for fut in as_completed(futures):
                    done(futures[fut], fut.result())
            except BaseException:  # Ctrl-C, SIGTERM, a failed run: no run outlives the suite
                _end_workers(pool)
                raise
    meta = {
        "command": "python -m bench " + shlex.join(argv if argv is not None else sys.argv[1:]),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": _machine(), "load_start": load_start, "load_end": os.getloadavg()[0],
        "budget": args.budget, "seed": args.seed, "seeded": seeded, "jobs": args.jobs,
        "models": args.models, "methods": args.methods, "wall_s": time.perf_counter() - t0,
    }
    present = [job for job in jobs if (runs / f"{_name(job)}.json").exists()]
    meta.update(_run_totals(runs, present))
    meta["reused"] = len(present) - len(todo)
    meta["not_run"] = [_name(job) for job in jobs if job not in present]
    table = build_table(runs, args.models, args.methods)
    paths = write_outputs(table, args.out, meta)
    if args.readme:
        from bench._suite_report import update_readme

        update_readme(args.readme, json.loads(paths["meta"].read_text()))
    print()
    print(paths["md"].read_text().split("## Summary", 1)[1].split("## All rows", 1)[0].strip())
    print("\n" + "\n".join(f"{k}: {p}" for k, p in paths.items()))
    return 0


@contextlib.contextmanager
def _stopped_by_sigterm() -> Iterator[None]:
    """SIGTERM ends the suite as Ctrl-C does (the workers are ended, finished runs kept)."""
    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    before = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def _end_workers(pool: ProcessPoolExecutor) -> None:
    """Terminate the pool's processes (their runs are lost; finished run files stay)."""
    procs = list(getattr(pool, "_processes", {}).values())  # no public handle on them
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        p.terminate()
    for p in procs:
        p.join(timeout=10)


def _cli() -> int:
    try:
        return main()
    except KeyboardInterrupt:
        print("suite: stopped; finished runs are kept in the runs directory, and --resume "
              "continues from them", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(_cli())
