"""Target: the shipped STCP920 file, validation messages that name the key, the hash, the NoC."""

from __future__ import annotations

import pytest

from compiler.errors import TargetError
from compiler.target import Target


def test_default_matches_the_hardware_table() -> None:
    t = Target.default()
    assert (t.chip.clusters, t.chip.cores_per_cluster, t.cores) == (4, 8, 32)
    assert (t.l1.data_bytes, t.l1.weight_bytes) == (1 << 20, 256 << 10)
    assert t.llb.bytes == 8 << 20
    assert t.matrix.macs_per_cycle == 2048 and (t.matrix.granule_m, t.matrix.granule_n) == (64, 32)
    assert 128e12 <= t.peak_flops <= 132e12  # "128 TFLOPS FP16"
    assert t.dtype_bytes == 2


def test_round_trip_and_hash() -> None:
    t = Target.default()
    again = Target.from_dict(t.to_dict())
    assert again == t and again.hash == t.hash and t.key == f"STCP920:{t.hash}"
    faster = t.replace(ddr={"bytes_per_cycle": 54})
    assert faster.hash != t.hash and faster.ddr.bytes_per_cycle == 54


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"l1": {"data_bytes": 0}}, "l1.data_bytes must be > 0"),
        ({"l1": {"data_bytes": -5}}, "l1.data_bytes must be > 0"),
        ({"ddr": {"latency_cycles": -1}}, "ddr.latency_cycles must be >= 0"),
        ({"llb": {"broadcast": "yes"}}, "llb.broadcast must be true or false"),
        ({"chip": {"clusters": 2.5}}, "chip.clusters must be an integer"),
        ({"matrix": {"macs_per_cycle": "many"}}, "matrix.macs_per_cycle must be a number"),
        ({"noc": {"mesh_rows": 3}}, "noc mesh 3x4"),
    ],
)
def test_validation_names_the_key(edit: dict, message: str) -> None:
    with pytest.raises(TargetError, match=message.replace(".", r"\.")):
        Target.default().replace(**edit)


def test_unknown_and_missing_keys(tmp_path) -> None:  # type: ignore[no-untyped-def]
    text = (tmp_path / "t.toml")
    base = Target.default().to_dict()
    base["l1"]["colour"] = 3
    import json

    with pytest.raises(TargetError, match=r"unknown key l1\.colour"):
        Target.from_dict(json.loads(json.dumps(base)))
    del base["l1"]["colour"]
    del base["ddr"]["bytes"]
    with pytest.raises(TargetError, match=r"missing key ddr\.bytes"):
        Target.from_dict(base)
    text.write_text("name = [unclosed")
    with pytest.raises(TargetError, match="not valid TOML"):
        Target.from_file(text)
    with pytest.raises(TargetError, match="cannot read hardware file"):
        Target.from_file(tmp_path / "missing.toml")


def test_noc_geometry() -> None:
    t = Target.default()
    routers = {t.router_of(c, k) for c in range(4) for k in range(8)}
    assert len(routers) == 16  # 2 cores per router on a 4x4 mesh
    # cluster 0 occupies one 2x2 quadrant
    assert {t.router_of(0, k) for k in range(8)} == {(0, 0), (0, 1), (1, 0), (1, 1)}
    route = t.route((0, 0), (1, 1))
    assert route == [((0, 0), (0, 1)), ((0, 1), (1, 1))]  # X first, then Y
    assert t.route((1, 1), (1, 1)) == []
