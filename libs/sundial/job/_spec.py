"""The job spec: what a tenant defines about a job (every input field of
``sundial.v1.Job``), as every part of Sundial holds it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sundial.job._policies import JobPolicies
from sundial.run import Target
from sundial.schedule import Schedule

__all__ = ["JobSpec"]


@dataclass(frozen=True, slots=True)
class JobSpec:
    """What a tenant defines about a job: every input field of ``sundial.v1.Job``.

    Built from a request with defaults already filled (an unset policy field is its
    default), so a valid spec is exactly what Sundial will do.
    """

    name: str
    schedule: Schedule
    target: Target | None
    description: str = ""
    payload: bytes = b""
    policies: JobPolicies = field(default_factory=JobPolicies)
    labels: Mapping[str, str] = field(default_factory=dict)
    paused: bool = False
    pause_note: str = ""
