"""The chip description shared by the compiler (capacities) and the simulator (timing).

A :class:`Target` is loaded from a TOML file and validated: a missing, unknown,
mistyped or impossible key raises :class:`~compiler.errors.TargetError` naming
the key (``l1.data_bytes must be > 0``). The default STCP920 description ships
in ``compiler/targets/stcp920.toml``; ``Target.hash`` identifies a description
in tuning records.

Example:
    >>> t = Target.default()
    >>> t.cores, t.l1.data_bytes, t.key
    (32, 1048576, 'STCP920:...')
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import tomllib
from dataclasses import dataclass, fields
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Any

from compiler._json_schema import short
from compiler.errors import TargetError

_DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "int8": 1}


@dataclass(frozen=True)
class ChipConfig:
    clusters: int
    cores_per_cluster: int


@dataclass(frozen=True)
class MatrixUnit:
    macs_per_cycle: int
    granule_m: int
    granule_n: int
    instr_overhead_cycles: float
    # INT8 MACs per FP16 MAC: each MAC does 2 INT8 or 1 FP16 multiply-accumulate per
    # cycle (256 TOPS vs 128 TFLOPS). Optional in hardware files (older files omit it).
    int8_rate: float = 2.0


@dataclass(frozen=True)
class VectorUnit:
    lanes: int
    transcendental_cycles_per_element: float
    # INT8 elements per FP16 element per cycle (ASSUMED: a 1024-bit RVV register holds
    # 128 INT8 or 64 FP16 elements). Optional in hardware files.
    int8_rate: float = 2.0


@dataclass(frozen=True)
class L1Config:
    data_bytes: int
    weight_bytes: int
    bytes_per_cycle: float


@dataclass(frozen=True)
class LLBConfig:
    bytes: int
    bytes_per_cycle: float
    broadcast: bool


@dataclass(frozen=True)
class DDRConfig:
    bytes: int
    bytes_per_cycle: float
    latency_cycles: float
    # Smallest DDR access: a gathered row shorter than this still costs a burst.
    # Optional in hardware files (older files omit it).
    burst_bytes: int = 32


@dataclass(frozen=True)
class DMAConfig:
    core_bytes_per_cycle: float
    system_dmas_per_cluster: int
    setup_cycles: float


@dataclass(frozen=True)
class NoCConfig:
    mesh_rows: int
    mesh_cols: int
    cores_per_router: int
    link_bytes_per_cycle: float
    hop_latency_cycles: float


@dataclass(frozen=True)
class HostConfig:
    launch_overhead_us: float
    # Ops outside the NPU support table run on the host CPU (issue 25 item 2). Optional
    # in hardware files (older files omit them); every default is ASSUMED:
    # * cpu_flops_per_s: a two-socket inference server's sustained FP32 rate on a
    #   convolution-like kernel, ~1 TFLOP/s (about 40 % of the 2.5 TFLOP/s AVX-512 peak
    #   of 32 cores x 2.5 GHz x 32 FLOP/cycle);
    # * pcie_bytes_per_s: PCIe 4.0 x16, 32 GB/s nominal, ~25 GB/s practical (STCP920
    #   manual; /work/shared/notes/stcp920-hardware.md "Host / card-to-card");
    # * pcie_latency_us: one DMA over PCIe with its completion and the host's wake-up.
    cpu_flops_per_s: float = 1.0e12
    pcie_bytes_per_s: float = 25.0e9
    pcie_latency_us: float = 5.0


_SECTIONS: dict[str, type] = {
    "chip": ChipConfig,
    "matrix": MatrixUnit,
    "vector": VectorUnit,
    "l1": L1Config,
    "llb": LLBConfig,
    "ddr": DDRConfig,
    "dma": DMAConfig,
    "noc": NoCConfig,
    "host": HostConfig,
}
# Keys that may be zero (latencies, overheads); everything else numeric must be > 0.
_MAY_BE_ZERO = {
    "matrix.instr_overhead_cycles",
    "ddr.latency_cycles",
    "dma.setup_cycles",
    "noc.hop_latency_cycles",
    "host.launch_overhead_us",
    "host.pcie_latency_us",
}


MAX_TARGET_BYTES = 1 << 20
# Bounds that keep a hand-written file from making the loader or the simulator
# loop for ever: the STCP920 has 4 clusters of 8 cores on a 4x8 mesh.
_MAX_INT = 1 << 62
_MAX = {
    "chip.clusters": 1024,
    "chip.cores_per_cluster": 1024,
    "noc.mesh_rows": 1024,
    "noc.mesh_cols": 1024,
    "noc.cores_per_router": 1024,
    "dma.system_dmas_per_cluster": 1024,
}


@dataclass(frozen=True)
class Target:
    """A validated chip description; frozen, hashable, JSON-serialisable."""

    name: str
    clock_hz: float
    compute_dtype: str
    chip: ChipConfig
    matrix: MatrixUnit
    vector: VectorUnit
    l1: L1Config
    llb: LLBConfig
    ddr: DDRConfig
    dma: DMAConfig
    noc: NoCConfig
    host: HostConfig

    # ---- loading -----------------------------------------------------------------
    @classmethod
    def default(cls) -> Target:
        """The STCP920 description shipped with graphtune."""
        text = resources.files("compiler").joinpath("targets/stcp920.toml").read_text()
        return cls.from_toml(text, source="<default STCP920>")

    @classmethod
    def from_file(cls, path: str | Path) -> Target:
        """Load and validate a TOML hardware file (UTF-8 text of at most 1 MiB)."""
        from compiler.files import read_bounded

        p = Path(path)
        data = read_bounded(p, "hardware file", MAX_TARGET_BYTES, TargetError)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise TargetError(f"{p} is not a hardware file: not UTF-8 text (a binary file?)") \
                from None
        return cls.from_toml(text, source=str(p))

    @classmethod
    def from_toml(cls, text: str, source: str = "<string>") -> Target:
        """Parse TOML text into a validated Target."""
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise TargetError(f"{source} is not valid TOML: {exc}") from None
        except RecursionError:
            raise TargetError(f"{source} is not valid TOML: nested too deeply") from None
        return cls.from_dict(data, source=source)

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "<dict>") -> Target:
        """Validate a nested dict (the TOML layout) into a Target."""
        top = {"name": str, "clock_hz": float, "compute_dtype": str}
        unknown = set(data) - set(top) - set(_SECTIONS)
        if unknown:
            key = sorted(unknown)[0]
            raise TargetError(f"{source}: unknown key {short(key)} (valid: {_valid_keys()})")
        kwargs: dict[str, Any] = {}
        for key, typ in top.items():
            if key not in data:
                raise TargetError(f"{source}: missing key {key!r}")
            kwargs[key] = _coerce(key, data[key], typ, source)
        if kwargs["compute_dtype"] not in _DTYPE_BYTES:
            raise TargetError(
                f"{source}: compute_dtype must be one of {sorted(_DTYPE_BYTES)}, "
                f"got {kwargs['compute_dtype']!r}"
            )
        if kwargs["clock_hz"] <= 0:
            raise TargetError(f"{source}: clock_hz must be > 0")
        name = kwargs["name"]
        if not name or len(name) > 64 or ":" in name or name != name.strip():
            raise TargetError(
                f"{source}: name must be 1-64 characters without ':' or surrounding spaces, "
                f"got {name[:70]!r}"
            )
        for section, dc in _SECTIONS.items():
            raw = data.get(section)
            if not isinstance(raw, dict):
                raise TargetError(f"{source}: missing section [{section}]")
            names = {f.name for f in fields(dc)}
            extra = set(raw) - names
            if extra:
                raise TargetError(f"{source}: unknown key {section}.{str(sorted(extra)[0])[:64]}")
            values: dict[str, Any] = {}
            for f in fields(dc):
                dotted = f"{section}.{f.name}"
                if f.name not in raw:
                    if f.default is not dataclasses.MISSING:
                        values[f.name] = f.default
                        continue
                    raise TargetError(f"{source}: missing key {dotted}")
                typ = {"int": int, "float": float, "bool": bool}[str(f.type)]
                v = _coerce(dotted, raw[f.name], typ, source)
                if typ is not bool:
                    if v < 0 or (v == 0 and dotted not in _MAY_BE_ZERO):
                        bound = ">= 0" if dotted in _MAY_BE_ZERO else "> 0"
                        raise TargetError(f"{source}: {dotted} must be {bound}, got {v}")
                    limit = _MAX.get(dotted, _MAX_INT)
                    if v > limit:
                        raise TargetError(f"{source}: {dotted} must be <= {limit}, got {v}")
                values[f.name] = v
            kwargs[section] = dc(**values)
        target = cls(**kwargs)
        target._check_topology(source)
        return target

    def _check_topology(self, source: str) -> None:
        n, cpr = self.chip.cores_per_cluster, self.noc.cores_per_router
        routers = self.noc.mesh_rows * self.noc.mesh_cols
        if n % cpr or routers * cpr != self.cores:
            raise TargetError(
                f"{source}: noc mesh {self.noc.mesh_rows}x{self.noc.mesh_cols} with "
                f"{cpr} cores per router does not hold {self.chip.clusters} clusters of {n} cores"
            )
        try:
            self._cluster_block()
        except ValueError:
            raise TargetError(
                f"{source}: clusters of {n // cpr} routers do not tile the "
                f"{self.noc.mesh_rows}x{self.noc.mesh_cols} noc mesh"
            ) from None

    # ---- derived values ----------------------------------------------------------
    @property
    def cores(self) -> int:
        """Cores on the chip."""
        return self.chip.clusters * self.chip.cores_per_cluster

    @property
    def dtype_bytes(self) -> int:
        """Bytes per element of the compute data type (FP16: 2)."""
        return _DTYPE_BYTES[self.compute_dtype]

    @property
    def peak_flops(self) -> float:
        """Chip peak in FLOP/s (a MAC is two FLOPs)."""
        return 2.0 * self.matrix.macs_per_cycle * self.cores * self.clock_hz

    def to_dict(self) -> dict[str, Any]:
        """The TOML layout as a plain dict."""
        out: dict[str, Any] = {
            "name": self.name,
            "clock_hz": self.clock_hz,
            "compute_dtype": self.compute_dtype,
        }
        for section in _SECTIONS:
            out[section] = dataclasses.asdict(getattr(self, section))
        return out

    @cached_property
    def hash(self) -> str:
        """16 hex digits identifying every value of this description."""
        text = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def key(self) -> str:
        """``"<name>:<hash>"``: how records and ApplyHistoryBest name a target."""
        return f"{self.name}:{self.hash}"

    def replace(self, **sections: dict[str, Any]) -> Target:
        """A copy with some values changed, e.g. ``replace(ddr={"bytes_per_cycle": 54})``."""
        data = self.to_dict()
        for section, values in sections.items():
            if isinstance(values, dict):
                data[section] = {**data[section], **values}
            else:
                data[section] = values
        return Target.from_dict(data, source="<replace>")

    # ---- NoC geometry ------------------------------------------------------------
    def _cluster_block(self) -> tuple[int, int]:
        """(rows, cols) of routers that one cluster occupies."""
        per = self.chip.cores_per_cluster // self.noc.cores_per_router
        best: tuple[int, int] | None = None
        for br in range(1, per + 1):
            if per % br:
                continue
            bc = per // br
            if self.noc.mesh_rows % br or self.noc.mesh_cols % bc:
                continue
            if (self.noc.mesh_rows // br) * (self.noc.mesh_cols // bc) != self.chip.clusters:
                continue
            if best is None or abs(br - bc) < abs(best[0] - best[1]):
                best = (br, bc)
        if best is None:
            raise ValueError("no tiling")
        return best

    def router_of(self, cluster: int, core: int) -> tuple[int, int]:
        """Mesh coordinates (row, col) of the router a core sits on."""
        br, bc = self._cluster_block()
        per_row = self.noc.mesh_cols // bc
        qr, qc = divmod(cluster, per_row)
        local = core // self.noc.cores_per_router
        lr, lc = divmod(local, bc)
        return (qr * br + lr, qc * bc + lc)

    def route(
        self, src: tuple[int, int], dst: tuple[int, int]
    ) -> list[tuple[tuple[int, int], tuple[int, int]]]:
        """Directed links of the XY (dimension-order) route between two routers."""
        links = []
        r, c = src
        while c != dst[1]:
            nc = c + (1 if dst[1] > c else -1)
            links.append(((r, c), (r, nc)))
            c = nc
        while r != dst[0]:
            nr = r + (1 if dst[0] > r else -1)
            links.append(((r, c), (nr, c)))
            r = nr
        return links

    def cycles_to_us(self, cycles: float) -> float:
        """Convert cycles at the target clock to microseconds."""
        return cycles / self.clock_hz * 1e6


def _coerce(key: str, value: Any, typ: type, source: str) -> Any:
    if typ is bool:
        if not isinstance(value, bool):
            raise TargetError(f"{source}: {key} must be true or false, got {short(value)}")
        return value
    if typ is str:
        if not isinstance(value, str):
            raise TargetError(f"{source}: {key} must be a string, got {short(value)}")
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TargetError(f"{source}: {key} must be a number, got {short(value)}")
    if typ is int:
        if isinstance(value, float) and not value.is_integer():
            raise TargetError(f"{source}: {key} must be an integer, got {short(value)}")
        return int(value)
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise TargetError(f"{source}: {key} must be a finite number, got {str(value)[:40]}")
    return number


def _valid_keys() -> str:
    return "name, clock_hz, compute_dtype, " + ", ".join(f"[{s}]" for s in _SECTIONS)
