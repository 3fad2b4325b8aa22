"""BatchApplyJobs: many ApplyJob calls in one, each with its own result."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from sundial.api.jobs._update import JobUpdates
from sundial.api.model import Applied, JobRef
from sundial.core.errors import InvalidArgument, SundialError
from sundial.job import JobSpec

MAX_BATCH_APPLY = 1000
"""Jobs one BatchApplyJobs call applies at most."""

_CONCURRENCY = 8
"""Items applied at once: each is a few reads and at most one write (and may look a
target's name up), so a batch of 1,000 overlaps their round trips without taking more
than a few of the pool's connections."""


class JobBatches(JobUpdates):
    """BatchApplyJobs, on ApplyJob's own path."""

    async def batch_apply(
        self,
        tenant_id: str,
        items: Sequence[tuple[JobRef, JobSpec] | SundialError],
        *,
        validate_only: bool,
    ) -> list[Applied | SundialError]:
        """Apply each item as ApplyJob does (no expected_version, no request_id); an
        item is its error already when its conversion failed. One result per item, in
        order: what it did, or why it failed (which does not stop the others).

        Raises:
            InvalidArgument: No item, more than :data:`MAX_BATCH_APPLY`, or a job id
                named twice (``jobs[i].job_id``): nothing is applied.
        """
        if not items:
            raise InvalidArgument("jobs", "at least one job is required")
        if len(items) > MAX_BATCH_APPLY:
            raise InvalidArgument("jobs", f"at most {MAX_BATCH_APPLY:,} jobs, got {len(items):,}")
        first: dict[JobRef, int] = {}
        for i, item in enumerate(items):
            if isinstance(item, SundialError):
                continue
            if item[0] in first:
                raise InvalidArgument(
                    f"jobs[{i}].job_id", f"names the same job as jobs[{first[item[0]]}].job_id"
                )
            first[item[0]] = i
        slots = asyncio.Semaphore(_CONCURRENCY)

        async def apply(
            i: int, item: tuple[JobRef, JobSpec] | SundialError
        ) -> Applied | SundialError:
            if isinstance(item, SundialError):
                return item
            ref, spec = item
            async with slots:
                try:
                    return await self.apply_job(tenant_id, ref, spec, validate_only=validate_only)
                except InvalidArgument as exc:
                    return InvalidArgument(f"jobs[{i}].{exc.field}", exc.problem)
                except SundialError as exc:
                    return exc

        return list(await asyncio.gather(*(apply(i, item) for i, item in enumerate(items))))
