"""Starting or joining Ray for the measurer pool: a private loopback-only instance, or a
cluster by address, and whether the cluster has room for the pool's workers (moved out of
:mod:`autotune.running._ray_pool`, which re-exports :func:`start_ray`, ``LOOPBACK``,
``_loopback_only`` and ``_room``)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence

from compiler.errors import GraphtuneError

__all__ = ["LOOPBACK", "start_ray"]

LOOPBACK = "127.0.0.1"

_CLUSTER_VAR = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"

# Ray's own bookkeeping a private instance does without (no dashboard, no state API, no
# metrics export): the task events each worker reports every second, the metrics it
# exports, the per-handler event-loop statistics and event-loop lag probes. Measured
# (issue 20, 32 idle actors at 0.01 CPU, 10 s; then 2 calls of 4 in flight per actor):
# an idle actor 0.53 -> 0.41 % of a core, per call 1.63 -> 1.44 ms of actor CPU and
# 0.36 -> 0.20 ms of raylet/GCS CPU. Set for a local instance only (a joined cluster
# keeps its own configuration), unless the environment sets them already.
QUIET_RAY = {
    "RAY_task_events_report_interval_ms": "0",
    "RAY_enable_metrics_collection": "0",
    "RAY_metrics_report_interval_ms": "0",
    "RAY_event_stats": "0",
    "RAY_io_context_event_loop_lag_collection_interval_ms": "0",
}


def _loopback_only() -> Callable[[], None]:
    """Make Ray pick 127.0.0.1 as this node's address; returns the undo.

    Ray reads ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER`` once, when ``ray._private.ray_constants``
    is imported; with it off, every service binds and advertises loopback (and ``ray.init``
    turns a ``_node_ip_address`` of 127.0.0.1 into the host's address otherwise). The
    processes Ray spawns inherit the variable; a Ray already imported gets the constant too.
    """
    old_env = os.environ.get(_CLUSTER_VAR)
    os.environ[_CLUSTER_VAR] = "0"
    consts = sys.modules.get("ray._private.ray_constants")
    old_const = getattr(consts, "ENABLE_RAY_CLUSTER", None)
    if consts is not None:
        consts.ENABLE_RAY_CLUSTER = False  # type: ignore[attr-defined]

    def undo() -> None:
        if old_env is None:
            os.environ.pop(_CLUSTER_VAR, None)
        else:
            os.environ[_CLUSTER_VAR] = old_env
        mod = sys.modules.get("ray._private.ray_constants")
        if mod is not None:
            mod.ENABLE_RAY_CLUSTER = True if old_const is None else old_const  # type: ignore[attr-defined]

    return undo


def start_ray(address: str | None, workers: int) -> Callable[[], None] | None:
    """Connect to Ray: a new local loopback-only instance, or the cluster at ``address``.

    Returns how to disconnect (and stop a local instance), or None when Ray was
    already initialised by the caller (left as it is).

    Raises:
        GraphtuneError: the cluster at ``address`` cannot be reached.
    """
    if "ray" in sys.modules and sys.modules["ray"].is_initialized():
        return None
    if address is None:
        undo_loopback = _loopback_only()
        # Token mode, as Ray picks for a new local instance, without its notice on stderr.
        auth_set = "RAY_AUTH_MODE" not in os.environ
        os.environ.setdefault("RAY_AUTH_MODE", "token")
        quieted = [k for k in QUIET_RAY if k not in os.environ]
        os.environ.update({k: QUIET_RAY[k] for k in quieted})  # inherited by Ray's processes

        def undo() -> None:
            if auth_set:
                os.environ.pop("RAY_AUTH_MODE", None)
            for k in quieted:
                os.environ.pop(k, None)
            undo_loopback()

        try:
            import ray

            _refresh_auth_mode()
            # address="local": a new instance, never another user's `ray start` found on
            # this host; no dashboard; every service on loopback.
            ray.init(address="local", num_cpus=max(workers, 1), include_dashboard=False,
                     _node_ip_address=LOOPBACK, log_to_driver=False, configure_logging=False,
                     namespace="graphtune")
        except BaseException:
            undo()
            raise

        def stop() -> None:
            ray.shutdown()
            undo()

        return stop
    host, port = _check_reachable(address)
    # A head on this host's loopback: Ray would otherwise rewrite 127.0.0.1 to the host's
    # address, where nothing listens.
    undo = _loopback_only() if host in ("127.0.0.1", "localhost", "::1") else (lambda: None)
    import ray

    _refresh_auth_mode()
    try:
        ray.init(address=f"{host}:{port}", log_to_driver=False, configure_logging=False,
                 namespace="graphtune")
    except Exception as exc:  # noqa: BLE001 - Ray raises many kinds for a bad address
        undo()
        text = " ".join(str(exc).split()) + " " + " ".join(str(exc.__cause__ or "").split())
        if "AuthToken" in text or "Authentication" in text:
            raise GraphtuneError(
                f"the Ray cluster at {address} wants a token: set RAY_AUTH_MODE=token (the "
                "token is read from RAY_AUTH_TOKEN or ~/.ray/auth_token)") from None
        lines = str(exc).strip().splitlines()
        raise GraphtuneError(f"cannot join the Ray cluster at {address}: "
                             f"{lines[-1] if lines else type(exc).__name__}") from None

    def leave() -> None:
        ray.shutdown()
        undo()

    return leave


def _refresh_auth_mode() -> None:
    """Make Ray see ``RAY_AUTH_MODE`` as it is now, not as it was when Ray was imported.

    Ray caches its config (the authentication mode with it) at ``import ray``; joining a
    cluster by address never re-reads it, so a token set after the import (a notebook, a
    test, an embedding program) was ignored and the join failed as unauthenticated. Ray
    refreshes the same way when it turns token mode on itself. Only before ``ray.init``.
    """
    if "RAY_AUTH_MODE" not in os.environ:
        return
    import ray._raylet

    ray._raylet.Config.initialize("")  # type: ignore[attr-defined]


def _check_reachable(address: str) -> tuple[str, int]:
    """``(host, port)`` of a head address, after checking something listens there.

    Ray retries a wrong address for minutes; this fails in two seconds instead.

    Raises:
        GraphtuneError: malformed, or nothing accepts connections there.
    """
    import socket

    text = address.removeprefix("ray://")
    host, sep, port_text = text.rpartition(":")
    if not sep or not host or not port_text.isdigit():
        raise GraphtuneError(f"--ray-address must be HOST:PORT of a Ray head, got {address!r}")
    port = int(port_text)
    try:
        with socket.create_connection((host, port), timeout=2.0):
            pass
    except OSError as exc:
        raise GraphtuneError(f"cannot join the Ray cluster at {address}: nothing answers there "
                             f"({exc.strerror or exc})") from None
    return host, port


def _describe(cpus: float, need: Mapping[str, float]) -> str:
    parts = ([f"CPU={cpus:g}"] if cpus else []) + [f"{k}={v:g}" for k, v in sorted(need.items())]
    return ", ".join(parts) or "nothing"


def _describe_have(need: Mapping[str, float]) -> str:
    import ray

    have = ray.cluster_resources()
    return ", ".join(f"{k}={have.get(k, 0):g}" for k in ["CPU", *sorted(need)])


def _check_room(workers: int, cpus: float, need: Mapping[str, float], per: int = 1) -> None:
    """Fail at once when the cluster's nodes cannot hold ``workers`` workers of this shape,
    ``per`` of them to a process (a process's slots are on one node).

    Counts what each live node has in all (not what is free now: other jobs come and
    go; the start timeout covers a busy cluster).

    Raises:
        GraphtuneError: naming the missing resource and what the cluster has.
    """
    import ray

    shape = {**need, **({"CPU": cpus} if cpus else {})}
    if not shape:
        return
    nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
    for key, amount in need.items():
        if not any(res.get(key, 0) >= amount for res in nodes):
            raise GraphtuneError(
                f"no node of the Ray cluster has the resource {key}={amount:g} that each "
                f"measurer worker needs: start the nodes that have it with "
                f"`ray start --resources '{{\"{key}\": N}}'`, or drop it from "
                "--worker-resource / the measurer's resources")
    fits = [int(min(res.get(k, 0) / v for k, v in shape.items()) + 1e-9) for res in nodes]
    room = _room(fits, workers, per)
    if room >= workers:
        return
    procs = f" ({per} to a process: the measurer's slots_per_process)" if per > 1 else ""
    raise GraphtuneError(
        f"the Ray cluster has room for {room} of {workers} measurer workers{procs} (each "
        f"needs {_describe(cpus, need)}; the cluster has {_describe_have(need)}): use "
        f"--workers {room}, fewer CPUs per worker (--worker-cpus) or more nodes")


def _room(fits: Sequence[int], workers: int, per: int) -> int:
    """Workers (of ``workers`` wanted) the nodes can hold, ``per`` to a process on one node,
    the last process holding the rest: ``fits[n]`` workers fit on node ``n`` alone."""
    full, rest = divmod(workers, per)
    whole = sum(c // per for c in fits)  # processes of `per` workers
    if whole >= full and rest and (whole > full or any(c % per >= rest for c in fits)):
        return workers
    return min(whole, full) * per if rest else min(whole * per, workers)
