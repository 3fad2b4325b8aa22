"""The job in one shape: its spec, its policies and their defaults, its stored document.

Pure: no protobuf, no I/O (as :mod:`sundial.run` is for runs). The API builds a
:class:`JobSpec` from the wire and writes it with :func:`spec_to_columns`; the API's
reads and the scheduler decode the same columns here. Adding a job field touches the
proto, :class:`JobSpec`, this package's document codec, the API's conversion and rules,
the select list, a migration, the CLI and the console; ``tests/unit/job/test_shape.py``
walks every field of ``sundial.v1.Job`` through all of them, so a forgotten site fails.
"""

from sundial.job._document import (
    RESOLVED_CALENDARS_KEY,
    Columns,
    calendars_from_json,
    calendars_to_json,
    duration_from_json,
    duration_to_json,
    policies_from_json,
    policies_to_json,
    schedule_from_json,
    schedule_to_json,
    spec_from_columns,
    spec_to_columns,
    target_from_json,
    target_to_json,
)
from sundial.job._policies import (
    BUFFER_ALL_LIMIT,
    DEFAULT_LATENESS_THRESHOLD,
    DEFAULT_PRIORITY,
    JobPolicies,
    OverlapPolicy,
)
from sundial.job._spec import JobSpec

__all__ = [
    "BUFFER_ALL_LIMIT",
    "DEFAULT_LATENESS_THRESHOLD",
    "DEFAULT_PRIORITY",
    "RESOLVED_CALENDARS_KEY",
    "Columns",
    "JobPolicies",
    "JobSpec",
    "OverlapPolicy",
    "calendars_from_json",
    "calendars_to_json",
    "duration_from_json",
    "duration_to_json",
    "policies_from_json",
    "policies_to_json",
    "schedule_from_json",
    "schedule_to_json",
    "spec_from_columns",
    "spec_to_columns",
    "target_from_json",
    "target_to_json",
]
