"""Fire times of a preview or a description, and a job's SLO."""

from __future__ import annotations

from sundial.api.model import (
    Preview,
    PreviewEntry,
    Slo,
)
from sundial.core import wire
from sundial.schedule import (
    DstAnnotation,
)
from sundial.v1 import job_service_pb2

_ANNOTATION = {
    None: job_service_pb2.DST_ANNOTATION_NONE,
    DstAnnotation.SHIFTED_GAP: job_service_pb2.DST_ANNOTATION_GAP_SHIFTED,
    # Two gap times shifted onto one instant: the merged one is a shifted time that does
    # not run on its own (it is dropped).
    DstAnnotation.MERGED_GAP: job_service_pb2.DST_ANNOTATION_GAP_SHIFTED,
    DstAnnotation.SKIPPED_GAP: job_service_pb2.DST_ANNOTATION_GAP_SKIPPED,
    DstAnnotation.FOLD_FIRST: job_service_pb2.DST_ANNOTATION_FOLD_FIRST,
    DstAnnotation.FOLD_SECOND: job_service_pb2.DST_ANNOTATION_FOLD_SECOND,
    DstAnnotation.SKIPPED_FOLD_SECOND: job_service_pb2.DST_ANNOTATION_FOLD_SKIPPED,
}


def fire_time_out(entry: PreviewEntry) -> job_service_pb2.FireTime:
    """One preview entry; a skipped gap time has no instant and a naive local time."""
    fire = entry.fire
    annotation = _ANNOTATION[fire.annotation]
    message = job_service_pb2.FireTime(
        annotation=annotation,
        note=fire.note or "",
        dropped=fire.dropped,
        spec_index=fire.spec_index,
        calendar=fire.calendar,
    )
    if annotation == job_service_pb2.DST_ANNOTATION_GAP_SKIPPED:
        message.local_time = fire.wall.replace(tzinfo=None).isoformat()
        return message
    message.local_time = fire.local.isoformat()
    message.at.CopyFrom(wire.timestamp(fire.at))
    if entry.due_at is not None:
        message.due_at.CopyFrom(wire.timestamp(entry.due_at))
    return message


def preview_out(preview: Preview) -> job_service_pb2.PreviewScheduleResponse:
    """A preview's answer (built in the worker that computed it: JobLifecycle.preview)."""
    return job_service_pb2.PreviewScheduleResponse(
        fire_times=[fire_time_out(entry) for entry in preview.entries],
        exhausted=preview.exhausted,
    )


def slo_out(slo: Slo) -> job_service_pb2.JobSlo:
    """One window of a job's SLO."""
    return job_service_pb2.JobSlo(
        window=wire.duration(slo.window),
        window_start=wire.timestamp(slo.window_start),
        as_of=wire.timestamp(slo.as_of),
        lateness_threshold=wire.duration(slo.lateness_threshold),
        due=slo.due,
        on_time=slo.on_time,
        late=slo.late,
        missed=slo.missed,
        skipped=slo.skipped,
        failed=slo.failed,
        throttled=slo.throttled,
    )
