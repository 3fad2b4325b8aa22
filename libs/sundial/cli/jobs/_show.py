"""How ``sundial jobs`` shows a job, its runs, fire times and SLO."""

from __future__ import annotations

from collections.abc import Sequence

import typer
from google.protobuf.message import Message

from sundial.cli._client import (
    duration_text,
    enum_name,
    when,
)
from sundial.cli._output import Column, Output, emit, print_fields, print_table
from sundial.v1 import job_pb2, run_pb2
from sundial.v1 import job_service_pb2 as pb


def _spec_text(spec: job_pb2.Schedule | job_pb2.ScheduleSpec, which: str | None) -> str:
    if which == "cron":
        return f"cron {spec.cron}"
    if which == "interval":
        text = f"every {duration_text(spec.interval.every)}"
        if spec.interval.offset.ToTimedelta():
            text += f" +{duration_text(spec.interval.offset)}"
        if spec.interval.from_end:
            text += " after each run ends"
        return text
    if which == "once":
        return f"once {spec.once.ToJsonString()}"
    return "-"


def schedule_text(schedule: job_pb2.Schedule) -> str:
    """``cron 0 9 * * * (Europe/Berlin)``, ``every 5s``, ``once 2026-...Z``; a list of
    specs joined by ``; ``, then ``excluding calendars ...``."""
    if schedule.specs:
        text = "; ".join(_spec_text(s, s.WhichOneof("kind")) for s in schedule.specs)
    else:
        text = _spec_text(schedule, schedule.WhichOneof("spec"))
        if text == "-":
            return text
    if schedule.time_zone and schedule.time_zone != "UTC":
        text += f" ({schedule.time_zone})"
    if schedule.calendars:
        text += f" [calendars {', '.join(schedule.calendars)}]"
    return text


def target_text(target: job_pb2.Target) -> str:
    """``POST http://...`` or ``grpc host:port``."""
    if target.WhichOneof("kind") == "http":
        return f"{target.http.method} {target.http.url}"
    if target.WhichOneof("kind") == "grpc":
        return f"grpc {target.grpc.address}{' (plaintext)' if target.grpc.plaintext else ''}"
    return "-"


def auth_text(target: job_pb2.Target) -> str:
    """How the target's calls prove they come from Sundial beyond Sundial-Signature:
    ``standard webhooks, identity token (aud ..., lifetime 5m)``, or ``-``."""
    kind = target.WhichOneof("kind")
    if kind is None:
        return "-"
    auth = getattr(target, kind).auth
    parts = ["standard webhooks"] if auth.standard_webhooks else []
    if auth.HasField("identity_token"):
        token = auth.identity_token
        lifetime = duration_text(token.lifetime) if token.HasField("lifetime") else "5m"
        audience = token.audience or f"the target's {'URL' if kind == 'http' else 'address'}"
        parts.append(f"identity token (aud {audience}, lifetime {lifetime})")
    return ", ".join(parts) or "-"


def failure_text(failure: job_pb2.FailurePolicy) -> str:
    """What the failure policy does, in words."""
    count = failure.pause_after_consecutive_dead
    if count <= 0:
        return "never pause"
    if count == 1:
        return "pause at the first dead run"
    return f"pause after {count} consecutive dead runs"


def flow_text(flow: job_pb2.FlowPolicy) -> str:
    """A job's flow policy in words."""
    return (
        f"priority {flow.priority or 3}, "
        f"rate-limit key {flow.rate_limit_key or '(the target origin)'}, "
        f"concurrency key {flow.concurrency_key or '-'}"
    )


def print_job(job: job_pb2.Job) -> None:
    """A job as ``key  value`` lines."""
    policies = job.policies
    rows = [
        ("job id", job.job_id if job.job_id == job.uid else f"{job.job_id} (uid {job.uid})"),
        ("tenant", job.tenant_id),
        ("schedule", schedule_text(job.schedule)),
        ("target", target_text(job.target)),
        ("target auth", auth_text(job.target)),
        ("next run", when(job.next_run_at, set_=job.HasField("next_run_at"))),
        ("paused", f"yes ({job.pause_note})" if job.paused else "no"),
        ("version", str(job.version)),
        ("labels", ", ".join(f"{k}={v}" for k, v in sorted(job.labels.items())) or "-"),
        ("payload", f"{len(job.payload)} bytes"),
        (
            "policies",
            f"misfire {enum_name(policies.misfire, job_pb2.MisfirePolicy, 'MISFIRE_POLICY_')}, "
            f"overlap {enum_name(policies.overlap, job_pb2.OverlapPolicy, 'OVERLAP_POLICY_')}, "
            f"{policies.retry.max_attempts} attempts, "
            f"timeout {duration_text(policies.run_timeout)}, "
            f"late after {duration_text(policies.lateness_threshold)}",
        ),
        ("failure policy", failure_text(policies.failure)),
        ("flow", flow_text(policies.flow)),
        ("created", when(job.create_time)),
        ("updated", when(job.update_time)),
    ]
    if job.description:
        rows.insert(1, ("description", job.description))
    print_fields(f"job {job.name}", rows)


_RUN_COLUMNS = (
    Column("run key"),
    Column("kind", 3),
    Column("status"),
    Column("attempt", 2),
    Column("lateness", 1),
    Column("last error", 4),
)


def _error_text(text: str, wide: bool) -> str:
    text = " ".join(text.split())  # one line
    if wide or len(text) <= 60:
        return text or "-"
    return text[:57] + "..."


def print_runs(runs: Sequence[run_pb2.Run], title: str = "", *, wide: bool = False) -> None:
    """Runs as a table, newest first: the run key (job id and scheduled time) whole."""
    print_table(
        _RUN_COLUMNS,
        [
            (
                run.run_key,
                enum_name(run.kind, run_pb2.RunKind, "RUN_KIND_"),
                enum_name(run.status, run_pb2.RunStatus, "RUN_STATUS_"),
                str(run.attempt),
                f"{run.lateness.ToTimedelta().total_seconds():.3f}s"
                if run.HasField("lateness")
                else "-",
                _error_text(run.last_error, wide),
            )
            for run in runs
        ],
        wide=wide,
        title=title,
    )


def print_fire_times(fire_times: Sequence[pb.FireTime], title: str = "") -> None:
    """Fire times with their DST and calendar notes (a time DST or a calendar dropped:
    "(no run)"), and which spec produced each when the schedule has several."""
    several = any(fire.spec_index for fire in fire_times)
    columns = [Column("at (UTC)"), Column("local time"), Column("note", 1)]
    if several:
        columns.insert(2, Column("spec", 2))
    rows = []
    for fire in fire_times:
        row = [
            fire.at.ToJsonString() if fire.HasField("at") else "-",
            fire.local_time,
            " ".join(filter(None, ["(no run)" if fire.dropped else "", fire.note])) or "",
        ]
        if several:
            row.insert(2, str(fire.spec_index))
        rows.append(row)
    print_table(columns, rows, title=title)


def emit_preview(response: pb.PreviewScheduleResponse, title: str, output: Output) -> None:
    """A PreviewSchedule answer as ``-o`` asks (``name``: the times that run)."""

    def table(_wide: bool) -> None:
        print_fire_times(response.fire_times, title)
        if response.exhausted:
            typer.echo("the schedule ends here (no later fire time)")

    emit(
        response,
        output,
        table=table,
        names=lambda: [f.at.ToJsonString() for f in response.fire_times if not f.dropped],
    )


def emit_job(job: job_pb2.Job, response: Message, output: Output) -> None:
    """One job's response as ``-o`` asks (the job's fields for table and wide)."""
    emit(response, output, table=lambda _wide: print_job(job), names=lambda: [job.job_id])


def print_slo(slos: Sequence[pb.JobSlo], title: str = "SLO (scheduled runs)") -> None:
    """A job's SLO, one window a row: the occurrences due and how each went."""
    print_table(
        (
            Column("window"),
            Column("due"),
            Column("on time"),
            Column("late"),
            Column("throttled", 1),
            Column("missed", 1),
            Column("skipped", 2),
            Column("failed", 1),
            Column("on time %", 3),
        ),
        [
            (
                duration_text(s.window),
                str(s.due),
                str(s.on_time),
                str(s.late),
                str(s.throttled),
                str(s.missed),
                str(s.skipped),
                str(s.failed),
                f"{100 * s.on_time / s.due:.1f}" if s.due else "-",
            )
            for s in slos
        ],
        title=title + (f", late after {duration_text(slos[0].lateness_threshold)}" if slos else ""),
    )
