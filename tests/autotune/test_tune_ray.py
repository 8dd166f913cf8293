"""Measuring on Ray: a local loopback instance, a `ray start` head joined by address, a killed worker.

Three Ray starts at most in this module (about 10 s each on 2 cores): the local default, one
`ray start --head` shared by the other tests, and nothing else.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import psutil
import pytest

from autotune import GuidedOptions, JobState, tune
from autotune.measure._measurer import SimMeasurer
from autotune.running._ray_pool import start_ray
from autotune.running._ray_start import QUIET_RAY
from compiler.graph import Graph

ROOT = Path(__file__).resolve().parents[2]
RAY = Path(sys.executable).parent / "ray"
SMALL = GuidedOptions(population=24, generations=1, proposals=8, parents=4, retrain_every=8)
LOOPBACK = {"127.0.0.1", "::ffff:127.0.0.1", "::1"}


class SlowMeasurer(SimMeasurer):
    """The simulator, slowed down, writing its pid where the test can find it.

    Once a file ``restart`` exists in ``pid_dir``, a worker being (re)built acts on what
    it says: ``hang`` -- its start never ends (a restart stuck on a loaded machine);
    ``fail`` -- its start raises, once (a restart that fails for good).
    """

    def __init__(self, pid_dir: str, delay_s: float) -> None:
        super().__init__()
        self.pid_dir = pid_dir
        self.delay_s = delay_s

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        mode = Path(self.pid_dir, "restart")
        what = mode.read_text() if mode.exists() else ""
        if what == "hang":
            time.sleep(3600)
        elif what == "fail":
            mode.unlink()
            raise RuntimeError("this worker cannot start")

    def measure(self, graph: Any, schedules: Sequence[Any], target: Any,
                timeout_s: float | None) -> list[Any]:
        Path(self.pid_dir, str(os.getpid())).touch()
        busy = Path(self.pid_dir, f"{os.getpid()}.measuring")  # workers also breed rounds
        busy.touch()
        time.sleep(self.delay_s * len(schedules))
        out = super().measure(graph, schedules, target, timeout_s)
        busy.unlink()
        return out


def _measuring_pid(pid_dir: Path) -> int | None:
    """A process measuring now (a ``PID[.THREAD].measuring`` mark), waited for up to 2 s."""
    deadline = time.monotonic() + 2.0
    while not (measuring := sorted(p.name.split(".")[0] for p in pid_dir.glob("*.measuring"))):
        if time.monotonic() > deadline:
            return None
        time.sleep(0.01)
    return int(measuring[0])


def _session_processes(temp: str) -> list[psutil.Process]:
    """Processes of the Ray session under ``temp`` (and their children)."""
    found: dict[int, psutil.Process] = {}
    for p in psutil.process_iter(["cmdline"]):
        if temp in " ".join(p.info["cmdline"] or []):
            found[p.pid] = p
            try:
                for c in p.children(recursive=True):
                    found[c.pid] = c
            except psutil.NoSuchProcess:
                pass
    return list(found.values())


def _listening(procs: list[psutil.Process]) -> list[str]:
    out = []
    for p in procs:
        try:
            conns = p.net_connections(kind="inet")
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        out += [c.laddr.ip for c in conns if c.status == psutil.CONN_LISTEN]
    return out


@pytest.fixture(scope="module")
def ray_head() -> Iterator[tuple[str, dict[str, str], str]]:
    """`ray start --head` on loopback with its own temp dir and token; stopped by pid."""
    temp = tempfile.mkdtemp(prefix="gtray", dir="/tmp")  # short: Ray's socket paths are limited
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # Ray 2.60 authenticates local clusters with ~/.ray/auth_token (a token Ray caches per
    # process, so every test here uses that one); the head and every driver use it.
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_AUTH_MODE": "token"}
    env.pop("RAY_AUTH_TOKEN", None)
    env.pop("RAY_AUTH_TOKEN_PATH", None)
    if not (Path.home() / ".ray" / "auth_token").exists():
        subprocess.run([str(RAY), "get-auth-token", "--generate"], env=env, check=True,
                       capture_output=True, timeout=60)
    # The variable keeps `ray start`'s services on loopback (see autotune.running._ray_pool).
    subprocess.run([str(RAY), "start", "--head", "--node-ip-address", "127.0.0.1", "--port",
                    str(port), "--num-cpus", "2", "--include-dashboard", "false",
                    "--disable-usage-stats", "--temp-dir", temp],
                   env={**env, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}, check=True,
                   capture_output=True, timeout=180)
    try:
        yield f"127.0.0.1:{port}", env, temp
    finally:
        procs = _session_processes(temp)
        for p in procs:
            try:
                p.send_signal(signal.SIGTERM)
            except psutil.NoSuchProcess:
                pass
        _, alive = psutil.wait_procs(procs, timeout=5)
        for p in alive:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(alive, timeout=5)
        shutil.rmtree(temp, ignore_errors=True)


def test_local_default_ray_is_on_loopback(tiny_graph: Graph, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import ray

    from autotune.running._ray_pool import RayPool
    from autotune.sampling import _guided

    seen: list[str] = []
    effort: list[Any] = []
    # Every breeding request sends its seen set ahead (a new base as soon as one more was
    # seen): the workers must resolve it (GuidedSampler._seen_parts, RayPool.submit_breed).
    monkeypatch.setattr(_guided, "REBASE_AFTER", 0)
    bases: list[int] = []
    submit_breed = RayPool.submit_breed

    def counted(self: RayPool, batch_id: int, task_key: str, request: Any, scorer: Any) -> None:
        bases.append(len(request.seen_base))
        submit_breed(self, batch_id, task_key, request, scorer)

    monkeypatch.setattr(RayPool, "submit_breed", counted)

    quiet: list[dict[str, str | None]] = []

    def check(job: JobState) -> None:
        if not seen:
            seen.append(ray.nodes()[0]["NodeManagerAddress"])
            seen.append(os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"])
            # Ray's own bookkeeping is off in the raylet, the GCS and the actors of the
            # private instance (they inherit the driver's environment).
            for p in psutil.Process().children(recursive=True):
                try:
                    if p.name() in ("raylet", "gcs_server", "ray::_Worker"):
                        env = p.environ()
                        quiet.append({k: env.get(k) for k in QUIET_RAY})
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
        effort[:] = [job.tasks[0].study.sampler.effort]

    res = tune([tiny_graph], trials=10, workers=2, log=tmp_path / "l.jsonl", seed=0, guided=SMALL,
               callbacks=[check], curve=False)
    assert seen == ["127.0.0.1", "0"]
    assert len(quiet) >= 4 and all(q == QUIET_RAY for q in quiet), quiet  # raylet, GCS, 2 actors
    assert not set(QUIET_RAY) & set(os.environ)  # and the driver's environment is restored
    # The workers reported how long measuring took (what breeding is weighed against).
    measure_s, _ = effort[0]
    assert measure_s is not None and measure_s > 0
    assert res.total == 10 and not ray.is_initialized()
    assert any(bases), bases  # a request with a base was bred on a worker
    hosts = {json.loads(line)["prov"]["host"] for line in (tmp_path / "l.jsonl").open()}
    assert hosts == {socket.gethostname()}


def test_cli_tune_joins_a_loopback_head(ray_head: tuple[str, dict[str, str], str],
                                        tiny_onnx: Path, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import ray

    address, env, temp = ray_head
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    leave = start_ray(address, 0)
    assert leave is not None
    try:
        assert ray.nodes()[0]["NodeManagerAddress"] == "127.0.0.1"
    finally:
        leave()
    assert not ray.is_initialized()
    ips = _listening(_session_processes(temp))
    assert ips and set(ips) <= LOOPBACK, ips
    log = tmp_path / "c.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "autotune.cli", "tune", str(tiny_onnx), "--trials", "12",
         "--workers", "2", "--ray-address", address, "--log", str(log), "--seed", "0", "--json"],
        env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    # Ray printed "core_worker.cc ... Actor ... has constructor arguments in the object
    # store" for every worker while the graphs were constructor arguments (issue 21).
    assert "constructor arguments" not in done.stderr and "core_worker" not in done.stderr
    out = json.loads(done.stdout)
    assert out["total"] == 12 == len(log.read_text().splitlines())
    assert all(t["best_latency_us"] for t in out["tasks"])


# On the fresh-clone `make test` of stop 16 (load average ~6) this test hung until the 900 s
# timeout: the driver counted a restarting worker's ping as work in flight, so the job, its
# budget spent, waited for a restart that did not end (and pinged a worker dead for good
# forever). Both are forced here: with two workers the restart hangs (the job finishes on the
# other); with one the restart fails (a new worker replaces it).
@pytest.mark.timeout(300)
@pytest.mark.parametrize(("workers", "restart", "batch"),
                         [(2, "hang", 4), (1, "fail", 4), (2, "hang", None)])
def test_a_killed_worker_loses_its_batch_and_the_job_goes_on(
        ray_head: tuple[str, dict[str, str], str], tiny_graph: Graph, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, workers: int,
        restart: str, batch: int | None) -> None:
    """``batch`` None: the default (8 on 2 workers), then the job resumed."""
    import ray.cloudpickle

    address = ray_head[0]
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    killed: list[int] = []

    def kill_one(job: JobState) -> None:
        # Once every worker has started (the restart mode then touches the restart only).
        pids = sorted(p.name for p in pid_dir.iterdir() if p.name.isdigit())
        if killed or job.rounds < 2 or len(pids) < workers:
            return
        # One that is measuring now (not breeding), so it has candidates to lose; a worker
        # breeding now has a batch queued behind, so wait a moment for one to start (else
        # a fast job could end without a worker ever measuring at a callback).
        pid = _measuring_pid(pid_dir)
        if pid is None:
            return
        (pid_dir / "restart").write_text(restart)
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)

    log = tmp_path / "k.jsonl"
    with caplog.at_level("INFO", logger="autotune.ray"):
        res = tune([tiny_graph], trials=48, workers=workers, log=log, seed=0, guided=SMALL,
                   ray_address=address, measurer=SlowMeasurer(str(pid_dir), 0.05),
                   callbacks=[kill_one], curve=False, batch_size=batch)  # (bounds below)
    recs = [json.loads(line) for line in log.read_text().splitlines()]
    lost = [r for r in recs if r["result"]["status"] == "worker_lost"]
    size = batch or 8
    assert killed and res.total == 48 == len(recs)
    assert lost and all("worker died" in r["result"]["error"] for r in lost)
    assert res.tasks[0].errors.get("worker_lost") == len(lost)
    assert sum(r["result"]["status"] == "ok" for r in recs) == 48 - len(lost)
    # Only what the killed worker held (its running batch and the one queued behind it):
    # nothing is sent to a worker known to be down.
    assert len(lost) <= 2 * size
    if batch is None:  # resumed: the budget's records, no candidate measured twice (in
        # process: the killed worker's hung restart still holds one of the head's 2 CPUs)
        res = tune([tiny_graph], trials=72, workers=0, log=log, seed=0, guided=SMALL,
                   measurer=SlowMeasurer(str(pid_dir), 0.0), curve=False)
        recs = [json.loads(line) for line in log.read_text().splitlines()]
        from autotune.sampling._studies import candidate_id
        from compiler.schedule import GraphSchedule

        ok = [candidate_id(GraphSchedule.from_json(r["schedule"])) for r in recs
              if r["result"]["status"] == "ok"]
        assert res.total == 72 == len(recs) and len(ok) == len(set(ok)) >= 72 - len(lost)
    if workers == 1:  # measured after the loss: by a new worker, in the dead one's place
        assert recs[-1]["result"]["status"] == "ok"
        assert "could not restart" in caplog.text and "is back" in caplog.text


class SlotMeasurer(SimMeasurer):
    """The simulator behind a wait, two workers to a process (``slots_per_process``): it
    writes each measurement's process, thread and wall interval where the test can read
    them, and marks the processes measuring now."""

    slots_per_process = 2
    num_cpus = 0.01  # the head has 2 CPUs: each process reserves its slots' share

    def __init__(self, pid_dir: str, delay_s: float) -> None:
        super().__init__()
        self.pid_dir = pid_dir
        self.delay_s = delay_s

    def measure(self, graph: Any, schedules: Sequence[Any], target: Any,
                timeout_s: float | None) -> list[Any]:
        from autotune.measure import waiting

        me = f"{os.getpid()}.{threading.get_ident()}"
        Path(self.pid_dir, f"started.{os.getpid()}").touch()
        busy = Path(self.pid_dir, f"{me}.measuring")
        busy.touch()
        t0 = time.monotonic()
        out = super().measure(graph, schedules, target, timeout_s)
        with waiting():  # the other slot of this process measures meanwhile
            time.sleep(self.delay_s * len(schedules))
        with Path(self.pid_dir, "intervals").open("a") as f:
            f.write(f"{os.getpid()} {threading.get_ident()} {t0} {time.monotonic()}\n")
        busy.unlink()
        return out


@pytest.mark.timeout(300)
def test_a_killed_multi_slot_process_loses_only_its_slots_batches(
        ray_head: tuple[str, dict[str, str], str], tiny_graph: Graph, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """4 workers of a measurer with 2 slots a process: 2 measuring processes (their slots'
    waits overlap), breeding apart; one process is killed while measuring: what its two
    slots held (running and queued, at most 2 x 2 batches) is lost, the rest is measured,
    and the job goes on with the process restarted."""
    import ray.cloudpickle

    from autotune.running._ray_pool import RayPool

    address = ray_head[0]
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    pools: list[RayPool] = []
    real_init = RayPool.__init__

    def kept(self: RayPool, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        pools.append(self)

    monkeypatch.setattr(RayPool, "__init__", kept)
    killed: list[int] = []
    killed_at: list[float] = []

    def kill_one(job: JobState) -> None:
        pid = None if killed or job.rounds < 2 else _measuring_pid(pid_dir)
        if pid is None:
            return
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)
        killed_at.append(time.time())

    log = tmp_path / "m.jsonl"
    res = tune([tiny_graph], trials=64, workers=4, log=log, seed=0, guided=SMALL,
               ray_address=address, measurer=SlotMeasurer(str(pid_dir), 0.05),
               callbacks=[kill_one], curve=False, batch_size=4)  # (bounds below)
    (pool,) = pools
    assert len(pool._make) == 2 + 4  # two processes of two slots, the breeders apart
    recs = [json.loads(line) for line in log.read_text().splitlines()]
    lost = [r for r in recs if r["result"]["status"] == "worker_lost"]
    assert killed and res.total == 64 == len(recs)
    assert lost and all("worker died" in r["result"]["error"] for r in lost)
    assert len(lost) <= 2 * 2 * 4  # only the killed process's two slots' batches
    assert sum(r["result"]["status"] == "ok" for r in recs) == 64 - len(lost)
    # Measured by two processes (the killed one among them), two threads of one process
    # waiting at once (a process killed before it finished a measurement wrote no span).
    started = {int(p.name.split(".")[1]) for p in pid_dir.glob("started.*")}
    assert len(started) >= 2 and killed[0] in started
    spans = [line.split() for line in (pid_dir / "intervals").read_text().splitlines()]
    by_pid: dict[str, list[tuple[float, float]]] = {}
    for p, _, a, b in spans:
        by_pid.setdefault(p, []).append((float(a), float(b)))
    overlaps = sum(1 for ivs in by_pid.values() for i, (a, b) in enumerate(ivs)
                   for c, d in ivs[i + 1:] if a < d and c < b)
    assert overlaps > 0
    # The other process went on measuring.
    assert any(r["result"]["status"] == "ok" and r["prov"]["time_unix_s"] > killed_at[0]
               for r in recs)
