"""Callgrind instructions per measurement of a real tune's picks, as a worker measures them.

The guided picks of a tuning log are rebuilt as breeding builds them (decode the vector,
pre-check), the graph's memos are warmed on copies of them, then the held objects are
measured once through ``measure_json`` (what a worker does with the picks it bred;
:mod:`bench.measure_path`). With ``--cg`` the script re-runs itself under
``valgrind --tool=callgrind --instr-atstart=no``, instrumenting only that measuring call (a
small library built with ``cc`` from valgrind's ``callgrind.h`` starts and stops the
instrumentation: the setup runs at valgrind's uninstrumented speed), and prints the
instructions per measurement: a load-independent figure (same tree, log and inputs, same
count). ``--digest`` prints a digest of every ``SimResult`` field instead (repr of each,
timeline off and on), to compare trees and ``GRAPHTUNE_PURE_SIM=1`` bit for bit.

``--replay`` measures the picks as a tune's worker meets them instead: in the log's order,
one ``measure_json`` call each, nothing warmed (the graph's memos and the simulator's step
plans made as met; in a real tune ~32-40 % of the group steps miss the plan cache and making
those plans is much of a measurement). The picks are still rebuilt (decoded, pre-checked)
first, outside the instrumentation. ``--profile FILE`` writes a cProfile of the measuring
(``pstats``) instead of counting instructions. Without ``--cg`` it prints the measuring's
process time per measurement beside the 1-minute load (a clock figure: noisy under load).

Run (a tuning log of the model and its ONNX file, e.g. ``graphtune zoo bert_base --batch 8
--weights inputs -o bert.onnx`` then ``graphtune tune bert.onnx --trials 300 --workers 0
--seed 0 --log bert.c.jsonl``):
``PYTHONPATH=. .venv/bin/python bench/measure_cg.py --onnx bert.onnx --log bert.c.jsonl --cg``
(``--n``: the first N guided picks, 150 by default; ``--out``: keep the callgrind file, for
``callgrind_annotate --inclusive=yes``).
"""

from __future__ import annotations

import argparse
import cProfile
import ctypes
import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

sys.path.insert(0, str(Path(__file__).resolve().parent))

from measure_path import bred_picks, guided_picks  # noqa: E402

from autotune._tune import load_tasks  # noqa: E402
from autotune.measure._measurer import SimMeasurer, measure_json  # noqa: E402
from compiler.memo import search_gc  # noqa: E402
from compiler.schedule import GraphSchedule  # noqa: E402
from compiler.target import Target  # noqa: E402
from search_space import build_space  # noqa: E402
from sim import measure  # noqa: E402


def _picks(args: argparse.Namespace) -> tuple[object, list[GraphSchedule], list[dict]]:
    graph = load_tasks([args.onnx])[0].graph
    target = Target.default()
    space = build_space(graph, target, graph.batch)
    bred = bred_picks(space, guided_picks(args.log)[:args.n])
    return graph, bred, [s.to_json() for s in bred]


def _digest(graph: object, bred: list[GraphSchedule], target: Target) -> str:
    h = hashlib.sha256()
    for timeline in (False, True):
        for m in measure(graph, bred, target, timeline=timeline):  # type: ignore[arg-type]
            r = m.result
            h.update(repr((m.status, m.latency_us, m.throughput_per_s, m.lower_bound_us,
                           m.error)).encode())
            if r is not None:
                for name in r.__dataclass_fields__:
                    h.update(f"{name}={getattr(r, name)!r};".encode())
    return h.hexdigest()[:16]


_LIB = """#include <valgrind/callgrind.h>
void cg_start(void) { CALLGRIND_START_INSTRUMENTATION; }
void cg_stop(void) { CALLGRIND_STOP_INSTRUMENTATION; }
"""


def _under_callgrind(argv: list[str], n_out: Path | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = n_out or Path(tmp) / "cg.out"
        (Path(tmp) / "cg.c").write_text(_LIB)
        lib = Path(tmp) / "libcg.so"
        subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", str(lib),
                        str(Path(tmp) / "cg.c")], check=True)
        cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
               f"--callgrind-out-file={out}", sys.executable, __file__, *argv]
        env = dict(os.environ, PYTHONHASHSEED="0", MEASURE_CG_LIB=str(lib))
        run = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
        count = [line for line in run.stdout.splitlines() if line.startswith("picks ")]
        total = next(int(line.split()[1]) for line in out.read_text().splitlines()
                     if line.startswith("totals:"))
    n = int(count[0].split()[1].rstrip(","))
    print(f"{n} picks: {total:,} Ir, {total // n:,} Ir per measurement")


def _measure_picks(graph: object, sent: list[dict], bred: list[GraphSchedule], target: Target,
                   replay: bool) -> None:
    """Measure the held picks as a worker does: one batch, or (``replay``) one at a time."""
    if not replay:
        measure_json(SimMeasurer(), graph, sent, target, None, bred)  # type: ignore[arg-type]
        return
    measurer = SimMeasurer()
    for obj, held in zip(sent, bred):
        measure_json(measurer, graph, [obj], target, None, [held])  # type: ignore[arg-type]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--onnx", type=Path, required=True)
    ap.add_argument("--log", type=Path, required=True)
    ap.add_argument("--n", type=int, default=150, help="the first N guided picks of the log")
    ap.add_argument("--cg", action="store_true", help="run under callgrind, print Ir per pick")
    ap.add_argument("--out", type=Path, help="with --cg: keep the callgrind file here")
    ap.add_argument("--digest", action="store_true", help="print the results' digest")
    ap.add_argument("--replay", action="store_true",
                    help="measure the picks one at a time in order, plans made as met (no warm-up)")
    ap.add_argument("--profile", type=Path, help="write a cProfile of the measuring here")
    args = ap.parse_args(argv)
    if args.cg:
        _under_callgrind(["--onnx", str(args.onnx), "--log", str(args.log), "--n", str(args.n)]
                         + ["--replay"] * args.replay, args.out)
        return
    target = Target.default()
    with search_gc():
        graph, bred, sent = _picks(args)
        if args.digest:
            print(f"{len(bred)} picks, digest {_digest(graph, bred, target)}")
            return
        if not args.replay:
            measure(graph, [GraphSchedule.from_json(j) for j in sent], target)  # warm the memos
        lib = ctypes.CDLL(os.environ["MEASURE_CG_LIB"]) if "MEASURE_CG_LIB" in os.environ else None
        prof = cProfile.Profile() if args.profile else None
        if lib is not None:
            lib.cg_start()
        if prof is not None:
            prof.enable()
        cpu = time.process_time()
        _measure_picks(graph, sent, bred, target, args.replay)
        cpu = time.process_time() - cpu
        if prof is not None:
            prof.disable()
            prof.dump_stats(str(args.profile))
        if lib is not None:
            lib.cg_stop()
    print(f"picks {len(bred)}, {1e3 * cpu / max(len(bred), 1):.3f} ms CPU a measurement "
          f"(process time; 1-minute load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
