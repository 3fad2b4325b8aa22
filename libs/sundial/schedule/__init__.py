"""Sundial's time semantics: pure (no I/O, no protobuf), exact, explained, fast.

Every occurrence Sundial starts is decided here (docs/design.md section 4):

* specs: cron (5 fields, or 6 with seconds first; macros; ``L``, ``W``, ``#``; Jenkins
  ``H`` hashed stably from the job id), interval (every D with an offset) and once;
  bounds ``start_time``/``end_time`` and ``max_runs``;
* IANA zones from the pinned ``tzdata`` (fixed offsets are rejected);
* DST: ``AUTO`` follows Vixie cron / cronie (a fixed-time job in a gap runs when the
  clocks jump, in a fold once; a wildcard job follows the wall clock: nothing in the
  gap, both in the fold), with per-job ``GapPolicy``/``FoldPolicy`` overrides; every
  moved or dropped time is annotated;
* misfire planning (``RUN_ONCE``, ``SKIP``, ``CATCH_UP``) and deterministic jitter;
* several specs per schedule (their fire times unioned, an instant named twice firing
  once) and calendars that remove occurrences by local date (``EXCLUDE``/``INCLUDE``);
* caches so a herd of jobs sharing an expression and zone costs one computation.

Typical use::

    compiled = compile_schedule(Schedule(CronSpec("30 2 * * *"),
                                         time_zone="America/New_York"), job_id=job_id)
    fire = compiled.next_fire(last_due)        # FireTime | None; fire.at is the run key
    plan = plan_misfire(compiled, due, now, MisfirePolicy.CATCH_UP)

Validation errors are :class:`sundial.core.errors.InvalidArgument` naming the field.
"""

from ._cache import CacheStats, cache_info, clear_caches
from ._calendar import (
    MAX_CALENDAR_DATES,
    Calendar,
    CalendarKind,
    parse_calendar_dates,
)
from ._compile import (
    MAX_CALENDARS,
    MAX_SEARCH_STEPS,
    MAX_SPECS,
    SEARCH_HORIZON,
    CompiledSchedule,
    SearchExceeded,
    compile_schedule,
    depends_on_job_id,
)
from ._cron import MACROS, ParsedCron, parse_cron
from ._jitter import jitter_offset
from ._misfire import (
    DEFAULT_CATCHUP_WINDOW,
    DEFAULT_MAX_CATCHUP,
    DEFAULT_MISFIRE_THRESHOLD,
    MisfirePlan,
    plan_misfire,
    validate_misfire,
)
from ._spec import (
    CronSpec,
    DstAnnotation,
    FireTime,
    FoldPolicy,
    GapPolicy,
    IntervalSpec,
    MisfirePolicy,
    OnceSpec,
    Schedule,
    Spec,
)
from ._zone import DEFAULT_ZONE, load_zone

__all__ = [
    "DEFAULT_CATCHUP_WINDOW",
    "DEFAULT_MAX_CATCHUP",
    "DEFAULT_MISFIRE_THRESHOLD",
    "DEFAULT_ZONE",
    "MACROS",
    "MAX_CALENDARS",
    "MAX_CALENDAR_DATES",
    "MAX_SEARCH_STEPS",
    "MAX_SPECS",
    "SEARCH_HORIZON",
    "CacheStats",
    "Calendar",
    "CalendarKind",
    "CompiledSchedule",
    "CronSpec",
    "DstAnnotation",
    "FireTime",
    "FoldPolicy",
    "GapPolicy",
    "IntervalSpec",
    "MisfirePlan",
    "MisfirePolicy",
    "OnceSpec",
    "ParsedCron",
    "Schedule",
    "SearchExceeded",
    "Spec",
    "cache_info",
    "clear_caches",
    "compile_schedule",
    "depends_on_job_id",
    "jitter_offset",
    "load_zone",
    "parse_calendar_dates",
    "parse_cron",
    "plan_misfire",
    "validate_misfire",
]
