"""The wire contracts: generated code is current, and the .proto files keep the house rules.

Rules checked here (buf-lint style, plus Sundial's own):
  * libs/sundial/v1 and libs/sundial/internal/v1 are exactly what scripts/gen_protos.py
    generates from proto/;
  * every enum's zero value is <ENUM_NAME>_UNSPECIFIED and every value carries the prefix;
  * every RPC has its own <Method>Request / <Method>Response messages;
  * the services have exactly the RPCs the design names;
  * every message, field, oneof, enum, enum value, service and RPC has a comment.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from google.protobuf import descriptor, descriptor_pb2, timestamp_pb2
from grpc_tools import protoc

import sundial.internal.v1
import sundial.v1

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gen_protos.py"
PACKAGE = "sundial.v1"
"""What tenants' SDKs are generated from (proto/sundial/v1)."""
INTERNAL = "sundial.internal.v1"
"""Between Sundial's own services only: the ledger and the NATS payloads."""

EXPECTED_METHODS = {
    "JobService": {
        "CreateJob",
        "BatchCreateJobs",
        "ApplyJob",
        "BatchApplyJobs",
        "CountJobs",
        "PauseJobs",
        "ResumeJobs",
        "DeleteJobs",
        "TriggerJobs",
        "GetJob",
        "DescribeJob",
        "ListJobs",
        "UpdateJob",
        "DeleteJob",
        "PauseJob",
        "ResumeJob",
        "TriggerJob",
        "BackfillJob",
        "PreviewSchedule",
        "ListRuns",
        "GetRun",
        "ReplayRun",
        "CancelRun",
        "GetEgressPolicy",
        "RotateOwnSigningSecret",
        "ListJobRevisions",
        "RollbackJob",
        "ListAuditEvents",
        "CreateCalendar",
        "GetCalendar",
        "ListCalendars",
        "UpdateCalendar",
        "DeleteCalendar",
        "CreateNotificationChannel",
        "GetNotificationChannel",
        "ListNotificationChannels",
        "UpdateNotificationChannel",
        "DeleteNotificationChannel",
        "SetFlowLimit",
        "ListFlowLimits",
        "DeleteFlowLimit",
        "CreateSecret",
        "UpdateSecret",
        "ListSecrets",
        "DeleteSecret",
    },
    "RunLedgerService": {"LeaseRuns", "Heartbeat", "CompleteRuns"},
    "TargetService": {"Execute"},
    "AdminService": {
        "CreateTenant",
        "GetTenant",
        "ListTenants",
        "UpdateTenant",
        "CreateApiToken",
        "ListApiTokens",
        "RevokeApiToken",
        "RotateSigningSecret",
        "RewrapSecrets",
        "RotateIdentityKey",
        "ListIdentityKeys",
        "ClusterStatus",
        "SetTenantEgressPolicy",
        "GetTenantEgressPolicy",
    },
}

# Proto3 FileDescriptorProto field numbers, for SourceCodeInfo.Location paths.
_MESSAGE_TYPE, _ENUM_TYPE, _SERVICE = 4, 5, 6
_MSG_FIELD, _MSG_NESTED, _MSG_ENUM, _MSG_ONEOF = 2, 3, 4, 8
_ENUM_VALUE, _SERVICE_METHOD = 2, 2


def _pb2_modules() -> list[ModuleType]:
    return [
        importlib.import_module(f"{package.__name__}.{m.name}")
        for package in (sundial.v1, sundial.internal.v1)
        for m in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name)
        if m.name.endswith("_pb2")
    ]


def _files() -> list[descriptor.FileDescriptor]:
    return [module.DESCRIPTOR for module in _pb2_modules()]


def _all_enums() -> Iterator[descriptor.EnumDescriptor]:
    def walk(message: descriptor.Descriptor) -> Iterator[descriptor.EnumDescriptor]:
        yield from message.enum_types
        for nested in message.nested_types:
            yield from walk(nested)

    for file in _files():
        yield from file.enum_types_by_name.values()
        for message in file.message_types_by_name.values():
            yield from walk(message)


def _services() -> dict[str, descriptor.ServiceDescriptor]:
    return {name: svc for file in _files() for name, svc in file.services_by_name.items()}


def _run_script(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _copy_project(dest: Path) -> Path:
    shutil.copytree(ROOT / "proto", dest / "proto")
    for package in ("v1", "internal/v1"):
        shutil.copytree(
            ROOT / "libs" / "sundial" / package,
            dest / "libs" / "sundial" / package,
            ignore=shutil.ignore_patterns("__pycache__"),
        )
    return dest / "libs" / "sundial" / "v1"


def test_committed_code_is_up_to_date() -> None:
    result = _run_script("--check")
    assert result.returncode == 0, result.stdout + result.stderr


def _tamper(generated: Path, how: str) -> None:
    if how == "edited":
        job = generated / "job_pb2.py"
        job.write_text(job.read_text() + "# edited by hand\n")
    elif how == "missing":
        (generated / "run_pb2.pyi").unlink()
    else:
        (generated / "old_pb2.py").write_text("")


@pytest.mark.parametrize(
    ("how", "expected"),
    [
        ("edited", "differs: libs/sundial/v1/job_pb2.py"),
        ("missing", "missing: libs/sundial/v1/run_pb2.pyi"),
        ("extra", "extra:   libs/sundial/v1/old_pb2.py"),
    ],
)
def test_check_fails_on_drift(tmp_path: Path, how: str, expected: str) -> None:
    generated = _copy_project(tmp_path)
    assert _run_script("--check", "--root", tmp_path).returncode == 0  # the copy starts clean
    _tamper(generated, how)

    result = _run_script("--check", "--root", tmp_path)

    assert result.returncode == 1
    assert expected in result.stderr
    assert "grpcio-tools 1.85.1" in result.stderr  # drift is explained by the tool version


def test_generation_repairs_drift_and_is_deterministic(tmp_path: Path) -> None:
    generated = _copy_project(tmp_path)
    (generated / "job_pb2.py").write_text("broken\n")
    (generated / "stale_pb2_grpc.py").write_text("")

    assert _run_script("--root", tmp_path).returncode == 0

    assert not (generated / "stale_pb2_grpc.py").exists()
    for committed in (ROOT / "libs" / "sundial" / "v1").iterdir():
        if committed.is_file() and committed.suffix != ".pyc":
            fresh = generated / committed.name
            assert fresh.read_bytes() == committed.read_bytes(), committed.name
    assert _run_script("--check", "--root", tmp_path).returncode == 0


def test_sundial_stays_a_namespace_package() -> None:
    assert not (ROOT / "libs" / "sundial" / "__init__.py").exists()
    assert (ROOT / "libs" / "sundial" / "v1" / "__init__.py").read_text().startswith('"""Generated')


def test_every_file_is_in_the_package() -> None:
    files = _files()
    assert {f.name: f.package for f in files} == {
        **{
            f"sundial/v1/{name}.proto": PACKAGE
            for name in (
                "admin",
                "bulk",
                "calendar",
                "egress",
                "flow",
                "job",
                "job_service",
                "run",
                "secret",
                "target",
            )
        },
        **{f"sundial/internal/v1/{name}.proto": INTERNAL for name in ("events", "ledger")},
    }


def test_the_public_package_imports_nothing_internal() -> None:
    """A tenant SDK generated from proto/sundial/v1 holds no internal service or message."""
    for file in _files():
        if file.package == PACKAGE:
            assert not [d.name for d in file.dependencies if d.package == INTERNAL], file.name


def test_enum_zero_values_are_unspecified_and_values_prefixed() -> None:
    enums = list(_all_enums())
    assert len(enums) >= 10
    for enum in enums:
        prefix = re.sub(r"(?<!^)(?=[A-Z])", "_", enum.name).upper() + "_"
        zero = enum.values_by_number[0]
        assert zero.name == f"{prefix}UNSPECIFIED", enum.full_name
        assert enum.values[0].number == 0, enum.full_name
        for value in enum.values:
            assert value.name.startswith(prefix), value.name


def test_services_have_the_expected_methods() -> None:
    services = _services()
    assert set(services) == set(EXPECTED_METHODS)
    for name, methods in EXPECTED_METHODS.items():
        assert set(services[name].methods_by_name) == methods, name


def test_every_rpc_has_its_own_request_and_response() -> None:
    seen: set[str] = set()
    for service in _services().values():
        for method in service.methods:
            assert method.input_type.name == f"{method.name}Request", method.full_name
            assert method.output_type.name == f"{method.name}Response", method.full_name
            assert method.input_type.full_name.startswith(f"{service.file.package}.")
            for message in (method.input_type, method.output_type):
                assert message.full_name not in seen, f"{message.full_name} is shared"
                seen.add(message.full_name)


def test_streaming_shape() -> None:
    methods = {m.name: m for svc in _services().values() for m in svc.methods}
    assert methods["Heartbeat"].client_streaming and methods["Heartbeat"].server_streaming
    unary = [m for name, m in methods.items() if name != "Heartbeat"]
    assert not any(m.client_streaming or m.server_streaming for m in unary)


def test_every_element_is_commented(tmp_path: Path) -> None:
    descriptor_set = tmp_path / "sundial.pb"
    protos = sorted(str(p) for p in (ROOT / "proto").rglob("*.proto"))
    code = protoc.main(
        [
            "protoc",
            f"--proto_path={ROOT / 'proto'}",
            f"--proto_path={Path(protoc.__file__).parent / '_proto'}",
            "--include_source_info",
            f"--descriptor_set_out={descriptor_set}",
            *protos,
        ]
    )
    assert code == 0
    fds = descriptor_pb2.FileDescriptorSet.FromString(descriptor_set.read_bytes())

    uncommented: list[str] = []
    for file in fds.file:
        commented = {
            tuple(loc.path)
            for loc in file.source_code_info.location
            if loc.leading_comments.strip() or loc.trailing_comments.strip()
        }
        for path, name in _commentable(file):
            if path not in commented:
                uncommented.append(f"{file.name}: {name}")
    assert not uncommented, "\n".join(uncommented)


def _commentable(file: descriptor_pb2.FileDescriptorProto) -> Iterator[tuple[tuple[int, ...], str]]:
    def enum(e: descriptor_pb2.EnumDescriptorProto, path: tuple[int, ...], scope: str):
        yield path, f"{scope}{e.name}"
        for i, value in enumerate(e.value):
            yield (*path, _ENUM_VALUE, i), f"{scope}{e.name}.{value.name}"

    def message(m: descriptor_pb2.DescriptorProto, path: tuple[int, ...], scope: str):
        if m.options.map_entry:
            return
        name = f"{scope}{m.name}"
        yield path, name
        for i, field in enumerate(m.field):
            yield (*path, _MSG_FIELD, i), f"{name}.{field.name}"
        for i, oneof in enumerate(m.oneof_decl):
            synthetic = any(f.proto3_optional and f.oneof_index == i for f in m.field)
            if not synthetic:
                yield (*path, _MSG_ONEOF, i), f"{name}.{oneof.name} (oneof)"
        for i, nested in enumerate(m.nested_type):
            yield from message(nested, (*path, _MSG_NESTED, i), f"{name}.")
        for i, nested_enum in enumerate(m.enum_type):
            yield from enum(nested_enum, (*path, _MSG_ENUM, i), f"{name}.")

    for i, m in enumerate(file.message_type):
        yield from message(m, (_MESSAGE_TYPE, i), "")
    for i, e in enumerate(file.enum_type):
        yield from enum(e, (_ENUM_TYPE, i), "")
    for i, service in enumerate(file.service):
        yield (_SERVICE, i), service.name
        for j, method in enumerate(service.method):
            yield (_SERVICE, i, _SERVICE_METHOD, j), f"{service.name}.{method.name}"


@pytest.mark.parametrize(
    ("seconds", "nanos", "suffix"),
    [
        (1772978400, 0, "2026-03-08T14:00:00Z"),
        (1772978597, 250_000_000, "2026-03-08T14:03:17.250Z"),
        (1772978597, 250_031_000, "2026-03-08T14:03:17.250031Z"),
    ],
)
def test_run_key_format_matches_the_documented_examples(
    seconds: int, nanos: int, suffix: str
) -> None:
    # run.proto defines the run key as "<job_id>@" + the protobuf JSON form of scheduled_at.
    job_id = "8f1c2e4a-7b3d-4c5e-9f60-1a2b3c4d5e6f"
    scheduled_at = timestamp_pb2.Timestamp(seconds=seconds, nanos=nanos)
    run_key = f"{job_id}@{scheduled_at.ToJsonString()}"
    assert run_key == f"{job_id}@{suffix}"
    assert f"{job_id}@{suffix}" in (ROOT / "proto" / "sundial" / "v1" / "run.proto").read_text()
