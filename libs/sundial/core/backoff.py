"""The one backoff of Sundial's infrastructure retries (dependencies, the ledger, fetches).

A job's retries are a different thing with a different name: the run's retry policy
(:class:`sundial.run.RetryPolicy`, full jitter, docs/design.md section 7). This is how a
service waits between attempts to reach its own dependencies and peers.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Backoff"]


@dataclass(frozen=True, slots=True)
class Backoff:
    """Exponential backoff with "equal jitter": attempt ``n`` waits between half and all
    of ``min(max_s, initial_s * multiplier ** (n - 1))``.

    The jitter spreads the retries of many replicas that lost the same peer at the same
    moment; keeping half of the delay fixed stops a replica from hammering it.
    """

    initial_s: float = 0.25
    max_s: float = 5.0
    """The longest wait between two attempts: how late a service may notice that its
    dependency came up."""
    multiplier: float = 2.0

    def delay_s(self, attempt: int, rand: Callable[[], float] = random.random) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        # The exponent is capped so a service that waited for days does not overflow.
        exponent = min(max(attempt - 1, 0), 64)
        ceiling = min(self.max_s, self.initial_s * self.multiplier**exponent)
        return ceiling / 2 + rand() * ceiling / 2
