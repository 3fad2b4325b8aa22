"""Job operations of JobService: validate, compute schedules, write through the store.

Every write validates completely before touching the database, and each write is one
transaction, so a refused call changes nothing. Writes that depend on what they read
(UpdateJob, ResumeJob, ApplyJob) are optimistic: read, compute outside any transaction
(a DNS lookup must never hold a row lock), then write only if the version is unchanged.

A request names a job by its uid or by its client-chosen id (:data:`JobRef`); the
servicer resolves the latter with :meth:`JobManager.resolve` and the managers work on
uids only. ApplyJob is CreateJob with a client id when the tenant has no such job, else
UpdateJob of the whole definition unless it is already equal.

One use case per module, one class each, composed into :class:`JobManager`:
``_base`` (what they share), ``_create``, ``_read``, ``_update`` (UpdateJob,
RollbackJob, ApplyJob), ``_batch`` (BatchApplyJobs), ``_lifecycle`` (delete, pause,
resume, preview); ``_schedule`` computes fire times and previews.
"""

from sundial.api.jobs._base import APPLY_JOB, BATCH_CREATE_JOBS, CREATE_JOB
from sundial.api.jobs._batch import MAX_BATCH_APPLY, JobBatches
from sundial.api.jobs._lifecycle import JobLifecycle
from sundial.api.jobs._schedule import (
    PREVIEW_KEY,
    compiled_of,
    first_fire,
    preview,
    rendered_preview,
)

__all__ = [
    "APPLY_JOB",
    "BATCH_CREATE_JOBS",
    "CREATE_JOB",
    "MAX_BATCH_APPLY",
    "PREVIEW_KEY",
    "JobManager",
    "compiled_of",
    "first_fire",
    "preview",
    "rendered_preview",
]


class JobManager(JobBatches, JobLifecycle):
    """CreateJob, BatchCreateJobs, GetJob, DescribeJob, ListJobs, UpdateJob, RollbackJob,
    ApplyJob, BatchApplyJobs, DeleteJob, PauseJob, ResumeJob and PreviewSchedule for one
    tenant at a time (the constructor is :class:`~sundial.api.jobs._base.JobsBase`'s)."""
