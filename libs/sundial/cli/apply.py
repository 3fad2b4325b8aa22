"""``sundial apply -f FILE`` and ``sundial export``: jobs as code.

A jobs file is YAML: one job, a list of jobs, or several YAML documents of either. Each
job is ``sundial.v1.Job`` in the protobuf JSON mapping (``google.protobuf.json_format``:
snake_case or lowerCamelCase field names, durations as ``"90s"``, instants as RFC 3339,
enums by name, bytes as base64), so the proto is the file's schema; ``job_id`` is
required per job: a client-chosen id (the job is created when the tenant has none by
it) or the uid of an existing job. Output-only fields are ignored. ``paused`` and
``pause_note`` are honoured when a job is created and left alone on existing ones, as
ApplyJob does; ``export`` leaves them out with the output-only fields, so what it writes
is what apply compares and ``export`` then ``apply`` changes nothing.

``apply`` asks the server to validate every job first (BatchApplyJobs with
validate_only, 1,000 jobs a call) and applies only when all are valid (BatchApplyJobs
again, each job as ApplyJob applies it), then prunes: with ``--prune -l KEY=VALUE`` the jobs
carrying those labels that the file does not name are deleted. ``--dry-run`` writes
nothing and prints what would happen, with a unified diff of each job's YAML (current
against wanted, both as the server normalises them).
"""

from __future__ import annotations

import difflib
import json
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import grpc
import typer
import yaml
from google.protobuf import json_format

from sundial.cli._client import Connection, TokenOption, connected, fail, jobs_client, parse_pairs
from sundial.cli._output import Output, OutputOption
from sundial.v1 import job_pb2, job_service_pb2_grpc
from sundial.v1 import job_service_pb2 as pb

# What export leaves out: output-only fields, and the pause state ApplyJob does not apply.
_NOT_DEFINITION = (
    "uid",
    "tenant_id",
    "next_run_at",
    "version",
    "create_time",
    "update_time",
    "stats",
    "paused",
    "pause_note",
)
_OUTCOME_WORDS = {
    pb.APPLY_OUTCOME_CREATED: ("create", "created"),
    pb.APPLY_OUTCOME_UPDATED: ("update", "updated"),
    pb.APPLY_OUTCOME_UNCHANGED: ("unchanged", "unchanged"),
}
_PAGE = 1000

Labels = Annotated[
    list[str] | None,
    typer.Option("--label", "-l", help="Label KEY=VALUE (repeatable: every one must match)."),
]


class _Loader(yaml.SafeLoader):
    """YAML's safe loader without implicit timestamps: an unquoted ``2026-03-08T09:00:00Z``
    stays the text the JSON mapping reads, not a datetime."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def parse_jobs(text: str, source: str) -> list[job_pb2.Job]:
    """The jobs of a jobs file (see the module docstring); exits on a bad one.

    Args:
        text: The file's content.
        source: How to name the file in errors.
    """
    try:
        documents = list(yaml.load_all(text, Loader=_Loader))  # a SafeLoader
    except yaml.YAMLError as exc:
        fail(f"{source}: not YAML: {exc}")
    jobs: list[job_pb2.Job] = []
    seen: dict[str, str] = {}
    for d, document in enumerate(documents, 1):
        entries = document if isinstance(document, list) else [document]
        for e, entry in enumerate(entries, 1):
            if entry is None:
                continue  # an empty document
            where = f"{source}: document {d}" + (
                f", entry {e}" if isinstance(document, list) else ""
            )
            if not isinstance(entry, Mapping):
                fail(f"{where}: expected a job (a mapping), got {type(entry).__name__}")
            job = job_pb2.Job()
            try:
                json_format.ParseDict(dict(entry), job)
            except json_format.ParseError as exc:
                fail(f"{where}: {exc}")
            if not job.job_id:
                fail(f"{where}: job_id is required (the id to create or update the job by)")
            if job.job_id in seen:
                fail(f"{where}: job_id {job.job_id!r} is already used by {seen[job.job_id]}")
            seen[job.job_id] = where
            jobs.append(job)
    return jobs


def definition(job: job_pb2.Job) -> dict[str, Any]:
    """A job as a jobs-file entry: its JSON mapping without what apply does not apply,
    map entries sorted by key (protobuf keeps no map order), so equal jobs print
    equally."""
    entry = json_format.MessageToDict(job, preserving_proto_field_name=True)
    for name in _NOT_DEFINITION:
        entry.pop(name, None)
    _sort_maps(job_pb2.Job.DESCRIPTOR, entry)
    return entry


def _sort_maps(descriptor: Any, entry: dict[str, Any]) -> None:
    for field in descriptor.fields:
        value = entry.get(field.name)
        kind = field.message_type
        if value is None or kind is None:
            continue
        if kind.GetOptions().map_entry:
            entry[field.name] = dict(sorted(value.items()))
        elif isinstance(value, dict):
            _sort_maps(kind, value)


def to_yaml(entries: Sequence[Mapping[str, Any]]) -> str:
    """Entries as YAML documents, fields in proto order."""
    return yaml.safe_dump_all(entries, sort_keys=False, allow_unicode=True, width=100)


def _read(file: str) -> tuple[str, str]:
    if file == "-":
        return sys.stdin.read(), "stdin"
    try:
        return Path(file).read_text(encoding="utf-8"), file
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"{file}: cannot read it: {exc}")


def _listed(
    stub: job_service_pb2_grpc.JobServiceStub, md: Any, labels: Mapping[str, str]
) -> Iterator[job_pb2.Job]:
    """Every job of the tenant carrying ``labels``, by name."""
    token = ""
    while True:
        page = stub.ListJobs(
            pb.ListJobsRequest(labels=labels, page_size=_PAGE, page_token=token), metadata=md
        )
        yield from page.jobs
        token = page.next_page_token
        if not token:
            return


def _call(job_id: str, call: Any, *args: Any, **kwargs: Any) -> Any:
    """``call(*args, **kwargs)``; an RPC error ends the command naming the job."""
    try:
        return call(*args, **kwargs)
    except grpc.RpcError as exc:
        fail(f"{job_id}: {exc.code().name}: {exc.details()}")


def _batches(
    stub: job_service_pb2_grpc.JobServiceStub,
    md: Any,
    jobs: Sequence[job_pb2.Job],
    *,
    validate_only: bool,
) -> list[pb.BatchApplyJobsResult]:
    """Every job applied (or validated) by BatchApplyJobs, 1,000 a call; the first item
    that failed ends the command, naming its job (items before it stay applied, as
    they would have one ApplyJob call at a time)."""
    results: list[pb.BatchApplyJobsResult] = []
    for start in range(0, len(jobs), _PAGE):
        batch = jobs[start : start + _PAGE]
        answer = _call(
            batch[0].job_id,
            stub.BatchApplyJobs,
            pb.BatchApplyJobsRequest(jobs=batch, validate_only=validate_only),
            metadata=md,
        )
        for job, result in zip(batch, answer.results, strict=True):
            if result.HasField("error"):
                message = result.error.message.split(": ", 1)[-1] if result.error.field else ""
                where = result.error.field.split(".", 1)[-1] if result.error.field else ""
                detail = f"{where}: {message}" if where else result.error.message
                fail(f"{job.job_id}: {result.error.code}: {detail}")
            results.append(result)
    return results


def _diff(job_id: str, current: str, wanted: str) -> str:
    return "".join(
        difflib.unified_diff(
            current.splitlines(keepends=True),
            wanted.splitlines(keepends=True),
            fromfile=f"{job_id} (current)",
            tofile=f"{job_id} (wanted)",
        )
    )


@connected
def apply(
    *,
    conn: Connection,
    file: Annotated[
        str,
        typer.Option(
            "--filename", "-f", help="The jobs file (YAML), or - for stdin.", show_default=False
        ),
    ],
    dry_run: Annotated[
        bool,
        typer.Option(help="Change nothing: show what would happen, with a diff per job."),
    ] = False,
    prune: Annotated[
        bool,
        typer.Option(help="Delete the jobs with the --label labels that the file does not name."),
    ] = False,
    label: Labels = None,
    token: TokenOption = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """Create or update jobs to match a jobs file (YAML, proto JSON mapping of Job).

    ``-o json``/``yaml`` print one record per job (``job_id``, ``outcome``, ``version``,
    and with ``--dry-run`` the ``diff``) instead of the lines; ``-o name`` the ids."""
    report = _Report(output)
    labels = parse_pairs(label or [], "--label")
    if prune and not labels:
        fail("--prune needs --label KEY=VALUE: which jobs the file owns")
    if labels and not prune:
        fail("--label selects the jobs to prune: give --prune too")
    text, source = _read(file)
    jobs = parse_jobs(text, source)
    with jobs_client(conn, token) as (stub, md):
        # The server validates everything before anything is written: BatchApplyJobs
        # with validate_only, 1,000 jobs a call, then the same batches applied.
        planned = _batches(stub, md, jobs, validate_only=True)
        named = {job.job_id for job in jobs}
        for job, plan in zip(jobs, planned, strict=True):
            named.update((plan.job.job_id, plan.job.uid))
            if dry_run:
                _show_plan(stub, md, job.job_id, plan, report)
        for done in [] if dry_run else _batches(stub, md, jobs, validate_only=False):
            word = _OUTCOME_WORDS[done.outcome][1]
            report.add(done.job.job_id, word, f"(version {done.job.version})", done.job.version)
        for job in list(_listed(stub, md, labels)) if prune else []:
            if job.job_id in named or job.uid in named:
                continue
            if dry_run:
                diff = _diff(job.job_id, to_yaml([definition(job)]), "")
                report.add(job.job_id, "prune", "(would delete)", job.version, diff)
                continue
            _call(
                job.job_id,
                stub.DeleteJob,
                pb.DeleteJobRequest(
                    job_id=job.uid, expected_version=job.version, allow_missing=True
                ),
                metadata=md,
            )
            report.add(job.job_id, "pruned", "", job.version)
    report.close()


class _Report:
    """What ``apply`` did, job by job: lines as it goes (table), or one document at the
    end (json, yaml) or the ids (name)."""

    def __init__(self, output: Output) -> None:
        self.output = output
        self.records: list[dict[str, Any]] = []

    def add(self, job_id: str, outcome: str, note: str, version: int, diff: str = "") -> None:
        record: dict[str, Any] = {"job_id": job_id, "outcome": outcome, "version": version}
        if diff:
            record["diff"] = diff
        self.records.append(record)
        if self.output in (Output.TABLE, Output.WIDE):
            print(f"{job_id}: {outcome}{f' {note}' if note else ''}")
            if diff:
                print(diff, end="")

    def close(self) -> None:
        if self.output is Output.JSON:
            print(json.dumps(self.records, indent=2))
        elif self.output is Output.YAML:
            print(yaml.safe_dump(self.records, sort_keys=False), end="")
        elif self.output is Output.NAME:
            for record in self.records:
                print(record["job_id"])


def _show_plan(
    stub: job_service_pb2_grpc.JobServiceStub,
    md: Any,
    job_id: str,
    plan: pb.BatchApplyJobsResult,
    report: _Report,
) -> None:
    shown = plan.job.job_id or job_id
    word = _OUTCOME_WORDS[plan.outcome][0]
    if plan.outcome == pb.APPLY_OUTCOME_UNCHANGED:
        report.add(shown, word, "", plan.job.version)
        return
    current = ""
    if plan.outcome == pb.APPLY_OUTCOME_UPDATED:
        found = _call(job_id, stub.GetJob, pb.GetJobRequest(job_id=job_id), metadata=md)
        current = to_yaml([definition(found.job)])
    diff = _diff(job_id, current, to_yaml([definition(plan.job)]))
    report.add(shown, word, "", plan.job.version, diff)


@connected
def export(
    job_ids: Annotated[
        list[str] | None,
        typer.Argument(
            help="Jobs to export (ids or uids); default: every job.", show_default=False
        ),
    ] = None,
    *,
    conn: Connection,
    label: Labels = None,
    token: TokenOption = "",
    output: OutputOption = Output.YAML,
) -> None:
    """Print jobs as a jobs file (YAML) that `sundial apply -f` takes back unchanged
    (``-o json``: the same as a JSON list; ``-o name``: their ids)."""
    labels = parse_pairs(label or [], "--label")
    with jobs_client(conn, token) as (stub, md):
        if job_ids:
            found = [
                _call(job_id, stub.GetJob, pb.GetJobRequest(job_id=job_id), metadata=md).job
                for job_id in job_ids
            ]
            jobs = [job for job in found if all(job.labels.get(k) == v for k, v in labels.items())]
        else:
            jobs = list(_listed(stub, md, labels))
    if output is Output.NAME:
        sys.stdout.write("".join(f"{job.job_id}\n" for job in jobs))
    elif output is Output.JSON:
        sys.stdout.write(json.dumps([definition(job) for job in jobs], indent=2) + "\n")
    else:
        sys.stdout.write(to_yaml([definition(job) for job in jobs]))
