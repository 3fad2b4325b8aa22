"""Every integer a request carries is range-checked before arithmetic or SQL: the extremes
of int64 and int32 in every integer field of every JobService and AdminService request
are answered with a deliberate code (INVALID_ARGUMENT naming the field, NOT_FOUND, ...),
never INTERNAL or UNKNOWN (docs/design.md section 7, "Tenants and their limits").

The fields are found by walking the request descriptors, so a new integer field is
covered the day it is added. Against one real API server on a real database.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
import pytest_asyncio
from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from sundial.v1 import admin_pb2, job_pb2, job_service_pb2
from sundial.v1 import job_service_pb2 as pb
from tests.integration.api.support import Api, Tenant, make_job

NEVER = frozenset({grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN})
INT64_MAX, INT64_MIN = 2**63 - 1, -(2**63)
INT32_MAX, INT32_MIN = 2**31 - 1, -(2**31)
_INTEGER_TYPES = {
    FieldDescriptor.TYPE_INT64: (INT64_MAX, INT64_MIN, INT32_MAX + 1, -1),
    FieldDescriptor.TYPE_INT32: (INT32_MAX, INT32_MIN, -1),
    FieldDescriptor.TYPE_UINT32: (2**32 - 1,),
    FieldDescriptor.TYPE_UINT64: (2**64 - 1,),
    FieldDescriptor.TYPE_SINT64: (INT64_MAX, INT64_MIN),
    FieldDescriptor.TYPE_SINT32: (INT32_MAX, INT32_MIN),
}
# Well-known messages whose integers the wire conversions already bound (Timestamp,
# Duration: tested in test_bad_input.py).
_SKIPPED_MESSAGES = {"google.protobuf.Timestamp", "google.protobuf.Duration"}


def _integer_paths(descriptor: Descriptor, prefix: str = "", depth: int = 0) -> Iterator[str]:
    """Dotted paths of the integer fields of ``descriptor`` (and of its message fields,
    two levels down; repeated fields excluded)."""
    for field in descriptor.fields:
        path = f"{prefix}{field.name}"
        if field.is_repeated:
            continue
        if field.type in _INTEGER_TYPES:
            yield path
        elif (
            field.type == FieldDescriptor.TYPE_MESSAGE
            and depth < 2
            and field.message_type.full_name not in _SKIPPED_MESSAGES
        ):
            yield from _integer_paths(field.message_type, f"{path}.", depth + 1)


def _set(message: Message, path: str, value: int) -> None:
    *parents, name = path.split(".")
    for parent in parents:
        message = getattr(message, parent)
    setattr(message, name, value)


def _field_type(descriptor: Descriptor, path: str) -> int:
    *parents, name = path.split(".")
    for parent in parents:
        descriptor = descriptor.fields_by_name[parent].message_type
    return int(descriptor.fields_by_name[name].type)


def _cases() -> Iterator[tuple[str, str, str, int]]:
    for service_name, module in (("JobService", job_service_pb2), ("AdminService", admin_pb2)):
        service = module.DESCRIPTOR.services_by_name[service_name]
        for method in service.methods:
            if method.server_streaming or method.client_streaming:
                continue
            for path in _integer_paths(method.input_type):
                for value in _INTEGER_TYPES[_field_type(method.input_type, path)]:
                    yield service_name, method.name, path, value


CASES = list(_cases())


pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(shared_api: Api) -> tuple[Api, Tenant, str]:
    """The module's API, a tenant and one of its jobs."""
    tenant = await shared_api.tenant()
    job = (
        await shared_api.jobs.CreateJob(
            pb.CreateJobRequest(job=make_job("extremes")), metadata=tenant.md
        )
    ).job
    return shared_api, tenant, job.job_id


def _request(method: str, service: str, job_id: str, tenant_id: str) -> Message:
    """A request of ``method`` naming the test's job or tenant where it names one."""
    module = job_service_pb2 if service == "JobService" else admin_pb2
    # The input type as the service declares it (some live in other files: bulk.proto).
    declared = module.DESCRIPTOR.services_by_name[service].methods_by_name[method].input_type
    request: Message = message_factory.GetMessageClass(declared)()
    fields = request.DESCRIPTOR.fields_by_name
    if "job_id" in fields and fields["job_id"].type == FieldDescriptor.TYPE_STRING:
        request.job_id = job_id  # type: ignore[attr-defined]
    if "tenant_id" in fields and fields["tenant_id"].type == FieldDescriptor.TYPE_STRING:
        request.tenant_id = tenant_id  # type: ignore[attr-defined]
    if "job" in fields and fields["job"].message_type is job_pb2.Job.DESCRIPTOR:
        request.job.CopyFrom(make_job("extreme"))  # type: ignore[attr-defined]
        request.job.job_id = job_id  # type: ignore[attr-defined]
    return request


async def _call(api: Api, tenant: Tenant, service: str, method: str, request: Message) -> Any:
    if service == "JobService":
        return await getattr(api.jobs, method)(request, metadata=tenant.md, timeout=10)
    return await getattr(api.admin, method)(request, metadata=api.admin_md, timeout=10)


async def test_the_walk_finds_the_integers_the_issue_named() -> None:
    found = {(method, path) for _, method, path, _ in CASES}
    assert ("GetJob", "version") in found
    assert ("DeleteJob", "expected_version") in found
    assert ("ListJobRevisions", "page_size") in found


@pytest.mark.parametrize(
    ("service", "method", "path", "value"),
    CASES,
    ids=[f"{m}.{p}={v}" for _, m, p, v in CASES],
)
async def test_integer_extremes_are_never_internal(
    world: tuple[Api, Tenant, str], service: str, method: str, path: str, value: int
) -> None:
    api, tenant, job_id = world
    request = _request(method, service, job_id, tenant.tenant_id)
    _set(request, path, value)
    try:
        await _call(api, tenant, service, method, request)
    except grpc.aio.AioRpcError as exc:
        assert exc.code() not in NEVER, f"{method} {path}={value}: {exc.details()}"


@pytest.mark.parametrize("cursor", [[9999999999999999999], [-(2**63) - 1], [2**63], [10**30]])
@pytest.mark.parametrize("method", ["ListJobRevisions", "ListAuditEvents"])
async def test_page_token_cursors_past_int64_are_never_internal(
    shared_api: Api, method: str, cursor: Any
) -> None:
    api = shared_api
    tenant = await api.tenant()
    job = (
        await api.jobs.CreateJob(pb.CreateJobRequest(job=make_job("cursors")), metadata=tenant.md)
    ).job
    for _ in range(3):  # versions 2-4: a first page of one has a next page
        await api.jobs.PauseJob(pb.PauseJobRequest(job_id=job.job_id), metadata=tenant.md)
        await api.jobs.ResumeJob(pb.ResumeJobRequest(job_id=job.job_id), metadata=tenant.md)
    request = getattr(pb, f"{method}Request")(page_size=1)
    if "job_id" in request.DESCRIPTOR.fields_by_name:
        request.job_id = job.job_id
    first = await getattr(api.jobs, method)(request, metadata=tenant.md)
    assert first.next_page_token, "expected a second page"
    issued = json.loads(
        base64.urlsafe_b64decode(first.next_page_token + "=" * (-len(first.next_page_token) % 4))
    )
    issued["c"] = cursor
    request.page_token = base64.urlsafe_b64encode(json.dumps(issued).encode()).rstrip(b"=").decode()
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await getattr(api.jobs, method)(request, metadata=tenant.md)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, refused.value.details()
    assert (refused.value.details() or "").startswith("page_token")
