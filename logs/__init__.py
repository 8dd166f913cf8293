"""Tuning records: schema and versions, append/read, the best-record database, distill.

A log is a JSON-lines file, one measurement per line (format and versioning
rules in ``logs/README.md``). This package imports only the standard library
and :mod:`compiler.errors` for the root of the error hierarchy (``compiler``'s
``__init__`` loads nothing eagerly; a test checks that importing ``logs`` loads
no heavy package).

Example:
    >>> with RecordWriter("tune.jsonl") as out:
    ...     out.write(record)
    >>> db = Database.load("tune.jsonl")
    >>> db.best(record.workload_key, record.target)
"""

from logs._database import Database, KeyStats
from logs._distill import DistillRow, DistillSummary, InputRow, distill, expand_inputs, target_output
from logs._errors import LogError
from logs._io import (
    FileReport,
    LogWarning,
    Progress,
    RecordWriter,
    read_records,
    write_records_atomic,
)
from logs._record import (
    SCHEMA_VERSION,
    IndexKey,
    Provenance,
    Record,
    Result,
    Status,
    TargetKey,
    WorkloadInfo,
    parse_target_key,
    target_key_str,
)
from logs._schema import RECORD_SCHEMA, NewerVersionError, validate
from logs._table import ROW_FIELDS, record_row, to_dataframe
from logs._text import ScheduleText

__all__ = [
    "RECORD_SCHEMA",
    "ROW_FIELDS",
    "SCHEMA_VERSION",
    "Database",
    "DistillRow",
    "DistillSummary",
    "FileReport",
    "IndexKey",
    "InputRow",
    "KeyStats",
    "LogError",
    "LogWarning",
    "NewerVersionError",
    "Progress",
    "Provenance",
    "Record",
    "RecordWriter",
    "Result",
    "ScheduleText",
    "Status",
    "TargetKey",
    "WorkloadInfo",
    "distill",
    "expand_inputs",
    "parse_target_key",
    "read_records",
    "record_row",
    "target_key_str",
    "target_output",
    "to_dataframe",
    "validate",
    "write_records_atomic",
]
