"""Every JobService method needs a scope written in sundial.api.scopes' table, so a new
method is a decision (an unlisted one would need MANAGE)."""

from __future__ import annotations

from sundial.api.scopes import METHOD_SCOPES, required_scope
from sundial.core.auth import Scope
from sundial.v1 import job_service_pb2


def test_every_method_has_its_scope_and_no_stale_entry() -> None:
    methods = set(job_service_pb2.DESCRIPTOR.services_by_name["JobService"].methods_by_name)
    assert set(METHOD_SCOPES) == methods


def test_reads_are_read_and_an_unknown_method_needs_manage() -> None:
    for method, scope in METHOD_SCOPES.items():
        is_read = method.startswith(("Get", "List", "Describe", "Preview", "Count"))
        if method == "ListSecrets":  # secret names are the manage scope's business
            assert scope is Scope.MANAGE
        else:
            assert (scope is Scope.READ) == is_read, method
    assert required_scope("/sundial.v1.JobService/SomethingNew") is Scope.MANAGE
    assert required_scope("/sundial.v1.JobService/ListJobs") is Scope.READ
