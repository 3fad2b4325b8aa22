"""Reading jobs: a revision, the revisions, DescribeJob, ListJobs."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import timedelta

from sundial.api import slo, validation
from sundial.api.jobs._base import JobsBase, estimated_bytes, spec_bytes
from sundial.api.jobs._schedule import compiled_of, preview
from sundial.api.kit import (
    Pager,
)
from sundial.api.kit.paging import NUMBER, PAGE_BYTES, Text
from sundial.api.model import (
    Job,
    JobDescription,
    JobFilter,
    JobRevision,
    Page,
    RunFilter,
    as_revised,
)
from sundial.api.runs import with_due
from sundial.api.selector import check_search
from sundial.core.errors import (
    InvalidArgument,
    NotFound,
)

_REVISIONS = Pager("job_revisions", (NUMBER,))
_JOBS = Pager("jobs", (Text(validation.MAX_NAME_CHARS),))

# Jobs one page of ListJobs(target_forbidden) looks at (each distinct host resolved once).
_FORBIDDEN_SCAN = 1000


def prefix_upper_bound(prefix: str) -> str | None:
    """The smallest string above every string starting with ``prefix`` (byte order).

    UTF-8 byte order is code point order, so incrementing the last code point that can
    be incremented gives the bound; None when there is none (all U+10FFFF).
    """
    chars = list(prefix)
    while chars:
        code = ord(chars[-1]) + 1
        if 0xD800 <= code <= 0xDFFF:  # surrogates cannot be encoded: skip the block
            code = 0xE000
        if code <= 0x10FFFF:
            chars[-1] = chr(code)
            return "".join(chars)
        chars.pop()
    return None


class JobReading(JobsBase):
    """GetJob (at a revision too), ListJobRevisions, DescribeJob and ListJobs."""

    async def job_at(self, tenant_id: str, job_id: uuid.UUID, version: int) -> Job:
        """The job as revision ``version`` left it: its definition then, its ids as now
        (no stats, no next_run_at: those are not history)."""
        if version < 1:
            raise InvalidArgument("version", f"must be 1 or more, got {version}")
        job = await self.get_job(tenant_id, job_id)
        if version > job.version:  # checked before any arithmetic on it (int64 edges)
            raise NotFound(f"job {job_id} has no revision {version} (it is at {job.version})")
        found = await self._store.job_revisions(
            tenant_id, job_id, before_version=version + 1, limit=1
        )
        if not found or found[0].version != version:
            raise NotFound(f"job {job_id} has no revision {version} (it is at {job.version})")
        return as_revised(job, found[0])

    async def job_revisions(
        self,
        tenant_id: str,
        job_id: uuid.UUID,
        *,
        page_size: int,
        page_token: str,
        full: bool = False,
    ) -> Page[JobRevision]:
        """A page of the job's revisions, newest first; NOT_FOUND for an unknown job
        (a deleted job's history stays, but only its id could name it). ``full``: the
        answer will carry payloads and header values (the page's byte budget counts
        them)."""
        await self.get_job(tenant_id, job_id)
        cursor = _REVISIONS.open(page_size, page_token, {"job": str(job_id)})
        before = None if cursor.after is None else cursor.after[0]
        revisions = await self._store.job_revisions(
            tenant_id, job_id, before_version=before, limit=cursor.limit
        )
        return cursor.page(
            revisions,
            lambda revision: [revision.version],
            size_of=lambda revision: spec_bytes(revision.spec, full=full),
        )

    async def describe_job(
        self, tenant_id: str, job_id: uuid.UUID, slo_windows: Sequence[timedelta] = ()
    ) -> JobDescription:
        """The job, its 10 latest runs, its next 10 fire times, its live run count and its
        SLO over each window (the defaults when none is given)."""
        windows = slo.check_windows(slo_windows)
        job = await self.get_job(tenant_id, job_id)
        compiled = compiled_of(job)
        runs = await self._store.list_runs(tenant_id, job_id, RunFilter(), before=None, limit=10)
        active = await self._store.count_active_runs(job_id)
        now = self._clock.now()
        threshold = job.spec.policies.lateness_threshold
        counts, unsure, misfires = await self._store.slo_inputs(
            tenant_id,
            job_id,
            [now - w for w in windows],
            now,
            threshold=threshold,
            jitter=job.spec.schedule.jitter,
        )
        return JobDescription(
            job=job,
            recent_runs=[with_due(run, compiled) for run in runs],
            upcoming=preview(compiled, now, 10, job.fired_count),
            active_runs=active,
            slo=slo.summarise(
                windows, now, threshold, compiled, counts=counts, unsure=unsure, misfires=misfires
            ),
        )

    async def list_jobs(
        self, tenant_id: str, job_filter: JobFilter, *, page_size: int, page_token: str
    ) -> Page[Job]:
        """A page of the tenant's jobs ordered by name."""
        cursor = _JOBS.open(page_size, page_token, job_filter.fingerprint())
        validation.check_labels(job_filter.labels, "labels", limit=validation.MAX_LABEL_FILTERS)
        check_search(job_filter.search)
        validation.check_text(
            job_filter.name_prefix, "name_prefix", validation.MAX_NAME_PREFIX_CHARS
        )
        after = "" if cursor.after is None else cursor.after[0]
        upper = prefix_upper_bound(job_filter.name_prefix) if job_filter.name_prefix else None
        if job_filter.target_forbidden:
            jobs, resume_after = await self._forbidden(
                tenant_id, job_filter, after, upper, cursor.size
            )
            return Page(jobs, cursor.token([resume_after]) if resume_after else "")
        jobs = await self._store.list_jobs(
            tenant_id, job_filter, after=after, name_upper_bound=upper, limit=cursor.limit
        )
        return cursor.page(jobs, lambda job: [job.spec.name], size_of=estimated_bytes)

    async def _forbidden(
        self, tenant_id: str, job_filter: JobFilter, after: str, upper: str | None, size: int
    ) -> tuple[list[Job], str | None]:
        """Up to ``size`` of the next :data:`_FORBIDDEN_SCAN` jobs whose target the
        tenant's current egress policy forbids, and the name the next page starts after
        (None on the last page): the last job looked at, so a page of allowed jobs is
        not looked at again."""
        scanned = await self._store.list_jobs(
            tenant_id, job_filter, after=after, name_upper_bound=upper, limit=_FORBIDDEN_SCAN + 1
        )
        more = len(scanned) > _FORBIDDEN_SCAN
        scanned = scanned[:_FORBIDDEN_SCAN]
        with_target = [job for job in scanned if job.spec.target is not None]
        verdicts = await self._guard.verdicts(
            [job.spec.target for job in with_target],  # type: ignore[misc]
            await self._egress.policy(tenant_id),
        )
        forbidden = {id(job) for job, v in zip(with_target, verdicts, strict=True) if v}
        found: list[Job] = []
        budget = PAGE_BYTES
        for job in scanned:
            if id(job) not in forbidden:
                continue
            budget -= estimated_bytes(job)
            if len(found) == size or (budget < 0 and found):
                return found, found[-1].spec.name
            found.append(job)
        return found, scanned[-1].spec.name if more else None
