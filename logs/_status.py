"""The schema version a record is written in, and the status of a measurement.

Apart from :mod:`logs._record` so that the schema check (:mod:`logs._schema`),
which the record's reader calls, can know them without importing the record.
"""

from __future__ import annotations

import enum

__all__ = ["SCHEMA_MAJOR", "SCHEMA_VERSION", "Status"]

SCHEMA_VERSION = "1.2"
"""The version this graphtune writes, as ``"major.minor"``."""

SCHEMA_MAJOR = 1
"""Records with a larger major version are refused; smaller minors are read."""


class Status(enum.StrEnum):
    """The outcome of one measurement; every value but ``OK`` is an error."""

    OK = "ok"
    INVALID_SCHEDULE = "invalid_schedule"
    CAPACITY = "capacity"
    SIM_ERROR = "sim_error"
    TIMEOUT = "timeout"
    WORKER_LOST = "worker_lost"
