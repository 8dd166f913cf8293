"""``tools/train_pretrained.py``: a model trained on saved rows (``--rows``) records the
rows' simulator fingerprint and corpus, rows without them (or of another feature set) are
refused; the models ``bench/sweep.py`` holds out are never in the corpus."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import numpy as np

import cost_model

ROOT = Path(__file__).resolve().parents[2]


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("train_pretrained",
                                                  ROOT / "tools" / "train_pretrained.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _rows(path: Path, **extra: object) -> Path:
    rng = np.random.default_rng(0)
    n, k = 64, len(cost_model.feature_names())
    np.savez_compressed(path, x=rng.random((n, k)), y=rng.random(n) * 1e3 + 1.0,
                        groups=np.repeat(np.arange(4), n // 4), **extra)  # type: ignore[arg-type]
    return path


def test_rows_keep_the_fingerprint_they_were_measured_with(tmp_path: Path) -> None:
    rows = _rows(tmp_path / "rows.npz", simulator=np.str_("0123456789ab"),
                 feature_set=np.str_(cost_model.feature_set_id()),
                 corpus=np.array(["tiny_cnn b8 {}"]), targets=np.array(["default"]), seed=7)
    out = tmp_path / "m.ubj"
    assert _tool().main(["--rows", str(rows), "--rounds", "3", "-o", str(out)]) == 0
    info = json.loads(out.with_suffix(".json").read_text())
    assert info["simulator"] == "0123456789ab"
    assert (info["corpus"], info["targets"], info["seed"]) == (["tiny_cnn b8 {}"], ["default"], 7)
    assert info["rows"] == 64


def test_rows_without_a_fingerprint_or_of_another_feature_set_are_refused(tmp_path: Path) -> None:
    tool = _tool()
    bare = _rows(tmp_path / "bare.npz")
    other = _rows(tmp_path / "other.npz", simulator=np.str_("0123456789ab"),
                  feature_set=np.str_("ffffffff"), corpus=np.array(["tiny_cnn b8 {}"]),
                  targets=np.array(["default"]), seed=0)
    for rows in (bare, other):
        out = tmp_path / f"{rows.stem}.ubj"
        assert tool.main(["--rows", str(rows), "-o", str(out)]) == 2
        assert not out.exists()
    assert tool.main(["--rows", str(tmp_path / "missing.npz")]) == 2


def test_the_benchs_held_out_models_are_never_in_the_corpus() -> None:
    tool = _tool()
    spec = importlib.util.spec_from_file_location("sweep_bench", ROOT / "bench" / "sweep.py")
    assert spec and spec.loader
    sweep = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sweep)
    corpus = {name for name, _, _ in tool.CORPUS}
    for key in sweep.HELD_OUT_DEFAULT:
        zoo_name = sweep.HELD_OUT[key][0]
        assert zoo_name in tool.HELD_OUT, key
        assert zoo_name not in corpus, key


def test_folds_leave_a_model_or_a_family_out_with_all_its_sizes_and_targets() -> None:
    tool = _tool()
    corpus = [f"{n} b{b} {o}" for n, b, o in tool.CORPUS]
    targets = list(tool.TARGETS)
    groups = np.arange(len(corpus) * len(targets))  # one row per (corpus entry, target)
    by_model = tool.folds_of(groups, corpus, targets, "model")
    by_family = tool.folds_of(groups, corpus, targets, "family")
    for i, entry in enumerate(corpus):
        rows = slice(i * len(targets), (i + 1) * len(targets))
        name = entry.split()[0]
        assert set(by_model[rows]) == {name}
        assert set(by_family[rows]) == {tool.FAMILY[name]}
    # both sizes of ResNet-18 leave together; DeepFM and DLRM are one family
    assert set(by_model) == {n for n, _, _ in tool.CORPUS}
    assert len(set(by_family)) < len(set(by_model))
    assert all(name in tool.FAMILY for name, _, _ in tool.CORPUS)


def test_the_settings_are_recorded_and_each_makes_a_model(tmp_path: Path) -> None:
    tool = _tool()
    assert tool.DEFAULT_SETTINGS in tool.SETTINGS
    for name in tool.SETTINGS:
        m = tool.make_model(name, 0, rounds=2)
        assert isinstance(m, cost_model.XGBModel) and m.rounds == 2
    rows = _rows(tmp_path / "rows.npz", simulator=np.str_("0123456789ab"),
                 feature_set=np.str_(cost_model.feature_set_id()),
                 corpus=np.array(["tiny_cnn b8 {}"]), targets=np.array(["default"]), seed=7)
    out = tmp_path / "m.ubj"
    assert tool.main(["--rows", str(rows), "--rounds", "3", "-o", str(out),
                      "--settings", "rank-d4"]) == 0
    info = json.loads(out.with_suffix(".json").read_text())
    assert info["settings"] == "rank-d4"
    assert cost_model.XGBModel.load(out).objective == "rank"


def test_the_shipped_model_was_trained_with_the_chosen_settings() -> None:
    """The shipped file is the one ``tools/train_pretrained.py`` makes by default (retrain it
    when the default settings change)."""
    tool = _tool()
    info = cost_model.pretrained_info()
    assert info is not None and info.get("settings") == tool.DEFAULT_SETTINGS
    path = cost_model.pretrained_path()
    assert path is not None
    want = tool.SETTINGS[tool.DEFAULT_SETTINGS].get("objective", "regression")
    assert cost_model.XGBModel.load(path).objective == want
