"""A job's policies: what happens around its runs, every default written here once.

Pure: the wire conversion (``sundial.api``'s convert) and the stored document
(:mod:`sundial.job._document`) both fill an unset field from :class:`JobPolicies`'
defaults, so a default changes in one place.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import timedelta

from sundial.run import RetryPolicy
from sundial.schedule import (
    DEFAULT_CATCHUP_WINDOW,
    DEFAULT_MAX_CATCHUP,
    DEFAULT_MISFIRE_THRESHOLD,
    MisfirePolicy,
)

__all__ = [
    "BUFFER_ALL_LIMIT",
    "DEFAULT_LATENESS_THRESHOLD",
    "DEFAULT_PRIORITY",
    "JobPolicies",
    "OverlapPolicy",
]


class OverlapPolicy(enum.Enum):
    """What a new scheduled occurrence does while an earlier run is unfinished."""

    SKIP = "SKIP"
    BUFFER_ONE = "BUFFER_ONE"
    BUFFER_ALL = "BUFFER_ALL"
    ALLOW_ALL = "ALLOW_ALL"
    CANCEL_OTHER = "CANCEL_OTHER"


BUFFER_ALL_LIMIT = 100
"""Most runs OVERLAP_POLICY_BUFFER_ALL lets wait (job.proto)."""

DEFAULT_LATENESS_THRESHOLD = timedelta(seconds=60)
"""Policies.lateness_threshold when unset (job.proto)."""

DEFAULT_PRIORITY = 3
"""FlowPolicy.priority when unset: the middle of 1 (highest) to 5 (lowest)."""


@dataclass(frozen=True, slots=True)
class JobPolicies:
    """A job's effective policies (every default filled in)."""

    misfire: MisfirePolicy = MisfirePolicy.RUN_ONCE
    misfire_threshold: timedelta = DEFAULT_MISFIRE_THRESHOLD
    catchup_window: timedelta = DEFAULT_CATCHUP_WINDOW
    max_catchup: int = DEFAULT_MAX_CATCHUP
    overlap: OverlapPolicy = OverlapPolicy.SKIP
    retry_max_attempts: int = 5
    retry_base_delay: timedelta = timedelta(seconds=10)
    retry_max_delay: timedelta = timedelta(hours=1)
    run_timeout: timedelta = timedelta(minutes=30)
    lateness_threshold: timedelta = DEFAULT_LATENESS_THRESHOLD
    """How late a scheduled run's first attempt may start and count as on time in the
    job's SLO, and told to channels that want late runs (docs/design.md sections 11, 12)."""

    pause_after_consecutive_dead: int = 0
    """The failure policy: pause after this many dead runs in a row (0: never)."""

    priority: int = DEFAULT_PRIORITY
    """Orders the tenant's own waiting runs: 1 first, 5 last (docs/design.md section 7,
    "Flow control")."""
    rate_limit_key: str = ""
    """The tenant's rate-limit key of the job's runs; empty: the target's origin."""
    concurrency_key: str = ""
    """The tenant's concurrency-limit key of the job's runs; empty: none."""

    @property
    def retry(self) -> RetryPolicy:
        """The retry part, as the run state machine takes it."""
        return RetryPolicy(self.retry_max_attempts, self.retry_base_delay, self.retry_max_delay)
