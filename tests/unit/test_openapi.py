"""The OpenAPI document (scripts/gen_openapi.py): valid OpenAPI 3.1, fresh, and covering
every RPC of the HTTP/JSON API with the bearer scheme and the error shape."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from openapi_spec_validator import validate

from sundial.v1 import admin_pb2, job_service_pb2

ROOT = Path(__file__).resolve().parents[2]
DOCUMENT = ROOT / "services" / "api" / "sundial" / "api" / "openapi.json"


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location(
        "gen_openapi", ROOT / "scripts" / "gen_openapi.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return json.loads(DOCUMENT.read_text())


def test_the_document_is_valid_openapi_3_1(document: dict[str, Any]) -> None:
    assert document["openapi"] == "3.1.0"
    validate(document)


def test_the_committed_document_is_what_the_protos_generate() -> None:
    assert _generator().render(ROOT) == DOCUMENT.read_text(), "run make generate"


def test_every_rpc_is_a_path_with_bearer_auth_and_the_error_shape(
    document: dict[str, Any],
) -> None:
    services = (
        job_service_pb2.DESCRIPTOR.services_by_name["JobService"],
        admin_pb2.DESCRIPTOR.services_by_name["AdminService"],
    )
    wanted = {f"/{s.full_name}/{m.name}" for s in services for m in s.methods}
    assert set(document["paths"]) == wanted
    assert document["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    assert document["security"] == [{"bearer": []}]
    for path, item in document["paths"].items():
        operation = item["post"]
        assert operation["description"], path  # the proto comment carried over
        error = operation["responses"]["default"]["content"]["application/json"]["schema"]
        assert error == {"$ref": "#/components/schemas/ConnectError"}


def test_fields_follow_the_proto_json_mapping(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    job = schemas["sundial.v1.Job"]["properties"]
    assert job["uid"]["readOnly"] is True
    assert job["nextRunAt"]["format"] == "date-time"
    assert job["version"]["type"] == "string"  # int64 is a string in the JSON mapping
    assert job["payload"]["contentEncoding"] == "base64"
    assert job["labels"] == {
        "type": "object",
        "additionalProperties": {"type": "string"},
        "description": job["labels"]["description"],
    }
    status = schemas["sundial.v1.RunStatus"]
    assert "RUN_STATUS_DEAD" in status["enum"]
    assert "selector" in schemas["sundial.v1.PauseJobsRequest"]["properties"]
