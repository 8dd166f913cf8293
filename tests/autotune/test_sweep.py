"""``graphtune sweep``: target variants, infeasible variants, resume, warm start, compile by variant."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from autotune import RunOptions, SearchOptions
from autotune.cli import main
from autotune.whatif._sweep import infeasible_reason, sweep
from autotune.whatif._targets import make_variants, parse_set, parse_value, target_toml
from compiler.errors import GraphtuneError, TargetError
from compiler.graph import Graph
from compiler.target import Target

BASE = Target.default()


# ---- variants ------------------------------------------------------------------------------------
def test_values_take_binary_size_suffixes() -> None:
    assert parse_value("l1.data_bytes", "512K") == 512 * 1024
    assert parse_value("l1.data_bytes", "1M") == 1 << 20
    assert parse_value("ddr.bytes", "2G") == 2 << 30
    assert parse_value("ddr.bytes_per_cycle", "13.5") == 13.5
    assert parse_value("llb.broadcast", "false") is False
    with pytest.raises(GraphtuneError, match="must be an integer"):
        parse_value("l1.data_bytes", "1.5")
    with pytest.raises(GraphtuneError, match="not a number"):
        parse_value("l1.data_bytes", "lots")


def test_variants_are_named_targets_with_the_cross_product() -> None:
    vs = make_variants(BASE, [parse_set("l1.data_bytes=512K,1M"), parse_set("ddr.bytes_per_cycle=13,27")])
    assert [v.name for v in vs] == [
        "STCP920+l1.data_bytes=512K,ddr.bytes_per_cycle=13",
        "STCP920+l1.data_bytes=512K,ddr.bytes_per_cycle=27",
        "STCP920+l1.data_bytes=1M,ddr.bytes_per_cycle=13",
        "STCP920+l1.data_bytes=1M,ddr.bytes_per_cycle=27",
    ]
    assert vs[0].target.l1.data_bytes == 512 * 1024 and vs[0].target.ddr.bytes_per_cycle == 13
    assert len({v.key for v in vs}) == 4 and all(v.key.startswith(v.name + ":") for v in vs)
    zipped = make_variants(BASE, [parse_set("l1.data_bytes=512K,1M"),
                                  parse_set("ddr.bytes_per_cycle=13,27")], zip_=True)
    assert [v.values for v in zipped] == [{"l1.data_bytes": 524288, "ddr.bytes_per_cycle": 13.0},
                                          {"l1.data_bytes": 1048576, "ddr.bytes_per_cycle": 27.0}]


def test_values_get_the_hardware_files_bounds() -> None:
    with pytest.raises(TargetError, match=r"l1\.data_bytes must be > 0"):
        make_variants(BASE, [parse_set("l1.data_bytes=0,1M")])
    with pytest.raises(TargetError, match=r"chip\.clusters must be <= 1024"):
        make_variants(BASE, [parse_set("chip.clusters=2000")])
    with pytest.raises(TargetError, match="does not hold"):  # the topology check, as --target
        make_variants(BASE, [parse_set("chip.clusters=3")])
    with pytest.raises(GraphtuneError, match="unknown target key"):
        parse_set("l1.size=1M")
    with pytest.raises(GraphtuneError, match="given twice"):
        parse_set("l1.data_bytes=1M,1024K")
    with pytest.raises(GraphtuneError, match="same number of values"):
        make_variants(BASE, [parse_set("l1.data_bytes=512K,1M"), parse_set("ddr.bytes_per_cycle=13")],
                      zip_=True)


def test_a_variants_hardware_file_reads_back_as_the_same_target() -> None:
    for v in make_variants(BASE, [parse_set("l1.data_bytes=384K,1M"), parse_set("llb.broadcast=false")]):
        assert Target.from_toml(target_toml(v.target)).key == v.key


# ---- feasibility ---------------------------------------------------------------------------------
def test_an_l1_too_small_for_any_schedule_is_infeasible(tiny_graph: Graph) -> None:
    why = infeasible_reason(tiny_graph, BASE.replace(l1={"data_bytes": 4096}))
    assert why is not None and why.startswith("capacity:") and "has 4096" in why
    assert infeasible_reason(tiny_graph, BASE) is None


@settings(max_examples=5, deadline=None)
@given(st.integers(min_value=10, max_value=16), st.integers(min_value=1, max_value=4))
def test_feasibility_is_monotone_in_l1(tiny_graph: Graph, log2: int, more: int) -> None:
    """A variant the check calls feasible stays feasible with more L1 (what fits, fits)."""
    small = BASE.replace(l1={"data_bytes": 1 << log2})
    big = BASE.replace(l1={"data_bytes": (1 << log2) * (1 + more)})
    if infeasible_reason(tiny_graph, small) is None:
        assert infeasible_reason(tiny_graph, big) is None


# ---- the sweep -----------------------------------------------------------------------------------
def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _cids(records: list[dict], chip: str) -> list[str]:
    from autotune.sampling._studies import candidate_id
    from compiler.schedule import GraphSchedule

    return [candidate_id(GraphSchedule.from_json(r["schedule"])) for r in records
            if r["target"]["chip"] == chip]


def test_sweep_table_resume_and_infeasible(tiny_graph: Graph, tmp_path: Path) -> None:
    vs = make_variants(BASE, [parse_set("l1.data_bytes=4K,64K,1M")])
    log = tmp_path / "sweep.jsonl"
    first = sweep([tiny_graph], vs, trials_per_variant=10, log=log, out=tmp_path / "out",
                  workers=0, seed=3, pretrained=False)
    rows = {r.variant: r for r in first.rows}
    assert rows[vs[0].name].status == "infeasible" and "capacity" in rows[vs[0].name].reason
    assert rows[vs[0].name].measurements == 0
    for v in vs[1:]:
        r = rows[v.name]
        assert r.status == "ok" and r.measurements == 10
        assert r.best_us is not None and r.o3_us is not None and r.bound_us is not None
        assert r.bound_us <= r.best_us <= r.o3_us and r.floor in ("compute", "DDR") and r.limit
    assert first.measured == 20
    files = {Path(f).name for f in first.files}
    assert {"table.csv", "table.json", "l1.data_bytes.png"} <= files
    assert (tmp_path / "out" / "table.csv").read_text().count("\n") == 4
    # the same sweep again measures nothing; a larger budget measures only what is missing
    again = sweep([tiny_graph], vs, trials_per_variant=10, log=log, out=tmp_path / "out",
                  workers=0, seed=3, pretrained=False)
    assert again.measured == 0 and [r.to_json() for r in again.rows] == [r.to_json() for r in first.rows]
    more = sweep([tiny_graph], vs, trials_per_variant=14, log=log, workers=0, seed=3, pretrained=False)
    assert more.measured == 8
    records = _read(log)
    for v in vs[1:]:
        cids = _cids(records, v.name)
        assert len(cids) == 14 and len(set(cids)) == 14, "a candidate was measured twice"


def test_compile_picks_each_variants_record(tiny_onnx: Path, tiny_graph: Graph, tmp_path: Path) -> None:
    """``compile --log sweep.jsonl --target targets/<variant>.toml``: ApplyHistoryBest per target."""
    from autotune import ApplyHistoryBest
    from compiler import dispatch

    vs = make_variants(BASE, [parse_set("l1.data_bytes=64K,1M")])
    log = tmp_path / "sweep.jsonl"
    res = sweep([tiny_graph], vs, trials_per_variant=8, log=log, out=tmp_path / "out", workers=0,
                seed=1, pretrained=False)
    records = _read(log)
    for v in vs:
        mine = [r for r in records if r["target"]["chip"] == v.name and r["result"]["status"] == "ok"]
        best = min(mine, key=lambda r: r["result"]["latency_us"])
        loaded = Target.from_file(tmp_path / "out" / "targets" / f"{v.name}.toml")
        assert loaded.key == v.key
        with ApplyHistoryBest(log):
            found = dispatch.resolve(tiny_graph.workload_key, loaded.key, "O3")
        assert found == best["schedule"]
    assert res.rows[0].best_us is not None
    runner = CliRunner()
    out = runner.invoke(main, ["compile", str(tiny_onnx), "--log", str(log), "--target",
                               str(tmp_path / "out" / "targets" / f"{vs[0].name}.toml"),
                               "-o", str(tmp_path / "a.stcobj"), "--strict"])
    assert out.exit_code == 0, out.output
    # a target that is not in the log falls back with today's warning
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with ApplyHistoryBest(log):
            assert dispatch.resolve(tiny_graph.workload_key, BASE.key, "O3") is None
    assert any("falling back to O3" in str(w.message) for w in caught)


def test_a_variant_starts_from_the_finished_variants(tiny_graph: Graph, tmp_path: Path) -> None:
    """The second variant's probe: first its cold share, the very records a cold sweep's
    tune of it starts with (:mod:`autotune.whatif._cold`), then the first one's best
    schedule, before the rest of its guided search."""
    from autotune.whatif._budget import probe_size
    from autotune.whatif._cold import cold_share

    vs = make_variants(BASE, [parse_set("ddr.bytes_per_cycle=27,13")])
    log = tmp_path / "sweep.jsonl"
    sweep([tiny_graph], vs, trials_per_variant=12, log=log, workers=0, seed=5, pretrained=False)
    records = _read(log)
    first = [r for r in records if r["target"]["chip"] == vs[0].name and r["result"]["status"] == "ok"]
    best = min(first, key=lambda r: r["result"]["latency_us"])
    from autotune.sampling._studies import candidate_id
    from compiler.schedule import GraphSchedule

    best_cid = candidate_id(GraphSchedule.from_json(best["schedule"]))
    second = _cids(records, vs[1].name)
    k = cold_share(probe_size(12))
    assert 0 < k < len(second)
    assert best_cid in second[k:] or best_cid in second[:k]
    cold = tmp_path / "cold.jsonl"
    sweep([tiny_graph], vs, trials_per_variant=12, log=cold, workers=0, seed=5, warm=False,
          pretrained=False)
    cold_second = _cids(_read(cold), vs[1].name)
    assert second[:k] == cold_second[:k]  # the cold share is a cold tune's start
    assert cold_second != second  # the warm start changed what was measured after it
    if best_cid not in second[:k]:  # then the warm seed goes first after the cold share
        assert second[k] == best_cid


def test_warm_ranker_ranks_from_other_targets_before_any_measurement(tiny_graph: Graph) -> None:
    from autotune.sampling._warm import PriorData, WarmRanker
    from search_space import build_space
    from sim import measure

    other = BASE.replace(ddr={"bytes_per_cycle": 13})
    space = build_space(tiny_graph, other, tiny_graph.batch)
    rng = np.random.default_rng(0)
    pool = [space.sample(rng, uniform=i % 2 == 0) for i in range(120)]
    ms = measure(tiny_graph, pool, other)
    ok = [(s, m.throughput_per_s) for s, m in zip(pool, ms) if m.status == "ok"]
    import cost_model

    x = np.asarray(cost_model.features(tiny_graph, [s for s, _ in ok], other))
    y = np.asarray([t for _, t in ok], dtype=np.float64)
    half = len(y) // 2
    prior = PriorData(x[:half], y[:half], np.zeros(half, dtype=np.int64))
    ranker = WarmRanker(tiny_graph, other, seed=0, prior=prior)
    assert ranker.label.startswith("xgb-warm/prior=")
    held = ranker.predict(ranker.features([s for s, _ in ok[half:]]))
    assert cost_model.metrics.spearman(held, y[half:]) > 0.5


def test_cli_sweep_errors_are_one_line(tiny_onnx: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    for args, what in ((["--set", "l1.data_bytes=0"], "l1.data_bytes must be > 0"),
                       (["--set", "l1.size=1M"], "unknown target key"),
                       (["--set", "l1.data_bytes"], "expected KEY=V1,V2")):
        r = runner.invoke(main, ["sweep", str(tiny_onnx), *args, "--log", str(tmp_path / "s.jsonl"),
                                 "-o", str(tmp_path / "o")])
        assert r.exit_code == 2 and r.output.count("\n") == 1, r.output
        assert r.output.startswith("graphtune: error:") and what in r.output
    assert not (tmp_path / "s.jsonl").exists()


def test_cli_sweep_writes_the_table(tiny_onnx: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    r = runner.invoke(main, ["sweep", str(tiny_onnx), "--set", "l1.data_bytes=4K,1M", "--set",
                             "ddr.bytes_per_cycle=13,27", "--trials-per-variant", "6", "--workers",
                             "0", "--seed", "0", "--log", str(tmp_path / "s.jsonl"), "-o",
                             str(tmp_path / "o"), "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output.splitlines()[-1])
    assert [row["status"] for row in doc["rows"]] == ["infeasible", "infeasible", "ok", "ok"]
    assert (tmp_path / "o" / "pareto.png").stat().st_size > 1000
    assert (tmp_path / "o" / "ddr.bytes_per_cycle.png").is_file()


def test_report_has_a_sweep_section(tiny_graph: Graph, tmp_path: Path) -> None:
    from autotune.report._report import read_tasks
    from autotune.report._sweep import sweep_section, variant_values

    assert variant_values("STCP920+l1.data_bytes=512K,ddr.bytes_per_cycle=13") == {
        "l1.data_bytes": "512K", "ddr.bytes_per_cycle": "13"}
    assert variant_values("STCP920") is None
    vs = make_variants(BASE, [parse_set("l1.data_bytes=64K,1M")])
    log = tmp_path / "sweep.jsonl"
    sweep([tiny_graph], vs, trials_per_variant=5, log=log, workers=0, seed=0, pretrained=False)
    tasks, _ = read_tasks([log])
    page = sweep_section(tasks)
    assert "Hardware sweep" in page and all(v.name in page for v in vs)
    assert page.count("<tr>") == 3 and "image/png" in page
    assert sweep_section([t for t in tasks if t.target.chip == BASE.name]) == ""


def test_the_shipped_model_matches_the_feature_set_and_a_tune_says_it_uses_it(
        tiny_graph: Graph, tmp_path: Path) -> None:
    import cost_model
    from autotune._tune import tune

    path = cost_model.pretrained_path()
    assert path is not None and path.name == f"xgb-{cost_model.feature_set_id()}.ubj"
    assert path.stat().st_size < 2 << 20
    model = cost_model.XGBModel.load(path)  # refuses a file trained on other features
    assert model.trained and model.feature_names[: len(cost_model.feature_names())] == \
        cost_model.feature_names()
    lines: list[str] = []
    res = tune([tiny_graph], trials=6, log=tmp_path / "t.jsonl",
               search=SearchOptions(seed=0, pretrained=True),
               run=RunOptions(workers=0, notify=lines.append, curve=False))
    from autotune.sampling._warm import stale_pretrained

    stale = stale_pretrained(path)
    assert lines[:1] and "shipped pre-trained cost model" in lines[0] and path.name in lines[0]
    assert lines[1:] == ([] if stale is None else [stale])
    tuners = [json.loads(x)["prov"].get("cost_model", "") for x in
              (tmp_path / "t.jsonl").read_text().splitlines()]
    assert any(t.startswith("xgb-warm/pretrained") for t in tuners), tuners
    assert res.measured == 6
    lines.clear()  # the log has records now: nothing to say, the default model ranks
    tune([tiny_graph], trials=8, log=tmp_path / "t.jsonl",
         search=SearchOptions(seed=0, pretrained=True),
         run=RunOptions(workers=0, notify=lines.append, curve=False))
    assert lines == []


def test_a_spent_time_budget_leaves_variants_for_a_re_run(tiny_graph: Graph, tmp_path: Path) -> None:
    vs = make_variants(BASE, [parse_set("ddr.bytes_per_cycle=13,27")])
    log = tmp_path / "sweep.jsonl"
    lines: list[str] = []
    cut = sweep([tiny_graph], vs, trials_per_variant=12, log=log, workers=0, seed=0,
                pretrained=False, time_budget_s=1e-6, notify=lines.append)
    assert [(r.status, r.measurements) for r in cut.rows] == [("not run", 0)] * 2
    assert any("time budget is spent: 2 variant(s) not tuned" in x for x in lines)
    done = sweep([tiny_graph], vs, trials_per_variant=12, log=log, workers=0, seed=0,
                 pretrained=False)
    assert [r.measurements for r in done.rows] == [12, 12]
    assert done.measured == 24 - cut.rows[0].measurements
