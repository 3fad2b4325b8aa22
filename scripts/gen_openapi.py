#!/usr/bin/env python3
"""Generate, or verify, the OpenAPI 3.1 document of Sundial's HTTP/JSON API.

The document is derived from the protos alone (``proto/sundial/v1``: no hand-written
copy): ``grpc_tools.protoc`` compiles them into a ``FileDescriptorSet`` with source
info, and this script walks its descriptors. Each RPC of JobService and AdminService is
a ``POST /<package>.<Service>/<Method>`` (the Connect protocol, JSON body in the proto
JSON mapping), its request and response messages are schemas under
``components/schemas`` (named by their full proto name), and the proto comments become
descriptions. The JSON mapping decides the schema of each field: ``lowerCamelCase``
names (the server also accepts the proto names), 64-bit integers as strings, bytes as
base64 strings, enums by name, ``Timestamp`` as RFC 3339 text, ``Duration`` as
``"1.5s"``, ``FieldMask`` as comma-separated paths, maps as objects; fields marked
``OUTPUT_ONLY`` are ``readOnly``. Every operation takes a bearer token (the ``bearer``
security scheme) and answers errors as Connect does (``ConnectError``: ``code``,
``message``, ``details`` with the ``google.rpc`` details gRPC sends).

The result is ``services/api/sundial/api/openapi.json``, served by the API's HTTP port
at ``/openapi.json``.

Usage::

    python scripts/gen_openapi.py            # write it (make generate)
    python scripts/gen_openapi.py --check    # fail when the committed one is stale (make verify)
"""

from __future__ import annotations

import argparse
import importlib.resources
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2
from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = Path("services/api/sundial/api/openapi.json")
SERVICES = ("sundial.v1.JobService", "sundial.v1.AdminService")
TITLE = "Sundial API"
VERSION = "v1"

FD = descriptor_pb2.FieldDescriptorProto
_OUTPUT_ONLY = 3  # google.api.FieldBehavior.OUTPUT_ONLY
_FIELD_BEHAVIOR = 1052  # the google.api.field_behavior extension's number

# Well-known types in the proto JSON mapping.
_WELL_KNOWN: dict[str, dict[str, Any]] = {
    "google.protobuf.Timestamp": {
        "type": "string",
        "format": "date-time",
        "description": "An RFC 3339 instant in UTC, e.g. 2026-03-08T09:00:00Z.",
    },
    "google.protobuf.Duration": {
        "type": "string",
        "pattern": r"^-?[0-9]+(\.[0-9]{1,9})?s$",
        "description": 'A duration in seconds with an "s" suffix, e.g. "90s", "0.250s".',
    },
    "google.protobuf.FieldMask": {
        "type": "string",
        "description": 'Comma-separated field paths, e.g. "schedule,labels".',
    },
    "google.protobuf.Empty": {"type": "object"},
}
_SCALARS: dict[int, dict[str, Any]] = {
    FD.TYPE_DOUBLE: {"type": "number", "format": "double"},
    FD.TYPE_FLOAT: {"type": "number", "format": "float"},
    FD.TYPE_INT64: {"type": "string", "format": "int64", "pattern": "^-?[0-9]+$"},
    FD.TYPE_UINT64: {"type": "string", "format": "uint64", "pattern": "^[0-9]+$"},
    FD.TYPE_SINT64: {"type": "string", "format": "int64", "pattern": "^-?[0-9]+$"},
    FD.TYPE_FIXED64: {"type": "string", "format": "uint64", "pattern": "^[0-9]+$"},
    FD.TYPE_SFIXED64: {"type": "string", "format": "int64", "pattern": "^-?[0-9]+$"},
    FD.TYPE_INT32: {"type": "integer", "format": "int32"},
    FD.TYPE_SINT32: {"type": "integer", "format": "int32"},
    FD.TYPE_SFIXED32: {"type": "integer", "format": "int32"},
    FD.TYPE_UINT32: {"type": "integer", "format": "int64", "minimum": 0},
    FD.TYPE_FIXED32: {"type": "integer", "format": "int64", "minimum": 0},
    FD.TYPE_BOOL: {"type": "boolean"},
    FD.TYPE_STRING: {"type": "string"},
    FD.TYPE_BYTES: {"type": "string", "contentEncoding": "base64"},
}

_ERROR_SCHEMA = {
    "type": "object",
    "description": (
        "A failed call (the Connect protocol's error): the gRPC status code in snake case,"
        " a message for people (for invalid_argument it starts with the field path), and"
        " the google.rpc details gRPC sends in its trailer (ErrorInfo with a stable reason,"
        " RequestInfo, BadRequest, RetryInfo, PreconditionFailure), each as its type name"
        " and its message in base64. The request id is in the x-request-id header."
    ),
    "properties": {
        "code": {
            "type": "string",
            "enum": [
                "canceled",
                "unknown",
                "invalid_argument",
                "deadline_exceeded",
                "not_found",
                "already_exists",
                "permission_denied",
                "resource_exhausted",
                "failed_precondition",
                "aborted",
                "out_of_range",
                "unimplemented",
                "internal",
                "unavailable",
                "data_loss",
                "unauthenticated",
            ],
        },
        "message": {"type": "string"},
        "details": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "type": {"type": "string", "description": "e.g. google.rpc.ErrorInfo"},
                    "value": {"type": "string", "contentEncoding": "base64"},
                    "debug": {"type": "object"},
                },
            },
        },
    },
    "required": ["code"],
}


def descriptor_set(root: Path) -> descriptor_pb2.FileDescriptorSet:
    """The protos under proto/sundial/v1 compiled with their imports and comments."""
    protos = sorted((root / "proto" / "sundial" / "v1").glob("*.proto"))
    include = str(importlib.resources.files("grpc_tools") / "_proto")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "set.binpb"
        argv = [
            "grpc_tools.protoc",
            f"--proto_path={root / 'proto'}",
            f"--proto_path={include}",
            "--include_imports",
            "--include_source_info",
            f"--descriptor_set_out={out}",
            *(str(p.relative_to(root / "proto")) for p in protos),
        ]
        if protoc.main(argv) != 0:
            raise SystemExit("gen_openapi: protoc failed")
        return descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())


def _clean(comment: str) -> str:
    """A proto comment as a description: lines joined into paragraphs."""
    paragraphs: list[str] = []
    current: list[str] = []
    for raw in comment.strip().splitlines():
        line = raw.strip()
        if not line:
            if current:
                paragraphs.append(" ".join(current))
                current = []
            continue
        if line.startswith(("*", "-")) or raw.startswith("   "):
            if current:
                paragraphs.append(" ".join(current))
            current = [line]
            continue
        current.append(line)
    if current:
        paragraphs.append(" ".join(current))
    return "\n\n".join(paragraphs)


class _Builder:
    """Walks the descriptors and builds the document."""

    def __init__(self, files: descriptor_pb2.FileDescriptorSet) -> None:
        self.messages: dict[str, descriptor_pb2.DescriptorProto] = {}
        self.enums: dict[str, descriptor_pb2.EnumDescriptorProto] = {}
        self.comments: dict[str, str] = {}
        self.files = list(files.file)
        for file in self.files:
            self._index(file)
        self.schemas: dict[str, Any] = {}

    def _index(self, file: descriptor_pb2.FileDescriptorProto) -> None:
        locations = {
            tuple(loc.path): loc.leading_comments for loc in file.source_code_info.location
        }

        def walk_message(
            message: descriptor_pb2.DescriptorProto, name: str, path: tuple[int, ...]
        ) -> None:
            self.messages[name] = message
            self.comments[name] = locations.get(path, "")
            for i, field in enumerate(message.field):
                self.comments[f"{name}.{field.name}"] = locations.get((*path, 2, i), "")
            for i, nested in enumerate(message.nested_type):
                walk_message(nested, f"{name}.{nested.name}", (*path, 3, i))
            for i, enum in enumerate(message.enum_type):
                walk_enum(enum, f"{name}.{enum.name}", (*path, 4, i))

        def walk_enum(
            enum: descriptor_pb2.EnumDescriptorProto, name: str, path: tuple[int, ...]
        ) -> None:
            self.enums[name] = enum
            self.comments[name] = locations.get(path, "")
            for i, value in enumerate(enum.value):
                self.comments[f"{name}.{value.name}"] = locations.get((*path, 2, i), "")

        for i, message in enumerate(file.message_type):
            walk_message(message, f"{file.package}.{message.name}", (4, i))
        for i, enum in enumerate(file.enum_type):
            walk_enum(enum, f"{file.package}.{enum.name}", (5, i))
        for i, service in enumerate(file.service):
            full = f"{file.package}.{service.name}"
            self.comments[full] = locations.get((6, i), "")
            for j, method in enumerate(service.method):
                self.comments[f"{full}.{method.name}"] = locations.get((6, i, 2, j), "")

    def ref(self, full_name: str) -> dict[str, Any]:
        if full_name in _WELL_KNOWN:
            return dict(_WELL_KNOWN[full_name])
        if full_name not in self.schemas:
            self.schemas[full_name] = {}  # placeholder: recursion stops here
            if full_name in self.enums:
                self.schemas[full_name] = self._enum(full_name)
            else:
                self.schemas[full_name] = self._message(full_name)
        return {"$ref": f"#/components/schemas/{full_name}"}

    def _enum(self, name: str) -> dict[str, Any]:
        enum = self.enums[name]
        lines = [_clean(self.comments.get(name, ""))]
        for value in enum.value:
            text = _clean(self.comments.get(f"{name}.{value.name}", ""))
            lines.append(f"- {value.name}: {text}" if text else f"- {value.name}")
        return {
            "type": "string",
            "enum": [value.name for value in enum.value],
            "description": "\n".join(line for line in lines if line),
        }

    def _field(self, message: str, field: descriptor_pb2.FieldDescriptorProto) -> dict[str, Any]:
        if field.type in (FD.TYPE_MESSAGE, FD.TYPE_ENUM):
            target = field.type_name.lstrip(".")
            entry = self.messages.get(target)
            if entry is not None and entry.options.map_entry:
                value = entry.field[1]
                return {"type": "object", "additionalProperties": self._field(target, value)}
            schema = self.ref(target)
        else:
            schema = dict(_SCALARS[field.type])
        if field.label == FD.LABEL_REPEATED:
            schema = {"type": "array", "items": schema}
        return schema

    def _message(self, name: str) -> dict[str, Any]:
        message = self.messages[name]
        properties: dict[str, Any] = {}
        for field in message.field:
            schema = self._field(name, field)
            text = _clean(self.comments.get(f"{name}.{field.name}", ""))
            if field.HasField("oneof_index") and not field.proto3_optional:
                group = message.oneof_decl[field.oneof_index].name
                text = f"{text}\n\nOne of `{group}`: set at most one of its fields.".strip()
            if _OUTPUT_ONLY in _behaviours(field):
                schema["readOnly"] = True
            if text:
                if "$ref" in schema:
                    schema = {"allOf": [schema], "description": text}
                else:
                    schema["description"] = text
            properties[field.json_name] = schema
        out: dict[str, Any] = {"type": "object", "properties": properties}
        if self.comments.get(name):
            out["description"] = _clean(self.comments[name])
        return out

    def document(self) -> dict[str, Any]:
        paths: dict[str, Any] = {}
        tags = []
        for file in self.files:
            for service in file.service:
                full = f"{file.package}.{service.name}"
                if full not in SERVICES:
                    continue
                tags.append({"name": service.name, "description": _clean(self.comments[full])})
                for method in service.method:
                    paths[f"/{full}/{method.name}"] = {
                        "post": self._operation(full, service.name, method)
                    }
        header = ""
        for file in self.files:
            if file.name != "sundial/v1/job_service.proto":
                continue
            for loc in file.source_code_info.location:
                if list(loc.path) == [12]:  # the header comment sits on `syntax`
                    header = _clean(loc.leading_comments or "".join(loc.leading_detached_comments))
        schemas = {"ConnectError": _ERROR_SCHEMA, **dict(sorted(self.schemas.items()))}
        return {
            "openapi": "3.1.0",
            "info": {
                "title": TITLE,
                "version": VERSION,
                "description": (
                    "Sundial's HTTP/JSON API: the gRPC services JobService and AdminService"
                    " over the Connect protocol (POST a JSON body in the proto JSON mapping"
                    " with Content-Type: application/json). Generated from proto/sundial/v1"
                    " by scripts/gen_openapi.py; do not edit.\n\n" + header
                ).strip(),
            },
            "servers": [{"url": "/"}],
            "security": [{"bearer": []}],
            "tags": tags,
            "paths": paths,
            "components": {
                "securitySchemes": {
                    "bearer": {
                        "type": "http",
                        "scheme": "bearer",
                        "description": (
                            "A tenant token for JobService, an admin token for AdminService:"
                            " Authorization: Bearer <token>."
                        ),
                    }
                },
                "schemas": schemas,
            },
        }

    def _operation(
        self, full: str, service: str, method: descriptor_pb2.MethodDescriptorProto
    ) -> dict[str, Any]:
        request = self.ref(method.input_type.lstrip("."))
        response = self.ref(method.output_type.lstrip("."))
        error = {
            "description": "The call failed (see ConnectError).",
            "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/ConnectError"}}
            },
        }
        return {
            "operationId": f"{service}_{method.name}",
            "tags": [service],
            "summary": _clean(self.comments.get(f"{full}.{method.name}", "")).split("\n")[0],
            "description": _clean(self.comments.get(f"{full}.{method.name}", "")),
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": request}},
            },
            "responses": {
                "200": {
                    "description": "The call succeeded.",
                    "content": {"application/json": {"schema": response}},
                },
                "default": error,
            },
        }


def _behaviours(field: descriptor_pb2.FieldDescriptorProto) -> list[int]:
    """The google.api.field_behavior values of ``field`` (read from its options'
    unknown fields: the extension is not imported here)."""
    raw = field.options.SerializeToString()
    values: list[int] = []
    i = 0
    while i < len(raw):
        key, i = _varint(raw, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(raw, i)
            if number == _FIELD_BEHAVIOR:
                values.append(value)
        elif wire == 2:
            size, i = _varint(raw, i)
            chunk = raw[i : i + size]
            i += size
            if number == _FIELD_BEHAVIOR:  # packed
                j = 0
                while j < len(chunk):
                    value, j = _varint(chunk, j)
                    values.append(value)
        elif wire == 5:
            i += 4
        elif wire == 1:
            i += 8
        else:
            break
    return values


def _varint(data: bytes, i: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[i]
        i += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, i
        shift += 7


def render(root: Path = ROOT) -> str:
    """The document, as the committed file holds it."""
    return (
        json.dumps(_Builder(descriptor_set(root)).document(), indent=2, ensure_ascii=False) + "\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail when the file is stale")
    args = parser.parse_args(argv)
    text = render()
    path = ROOT / OUTPUT
    if args.check:
        if not path.exists() or path.read_text() != text:
            print(f"gen_openapi: {OUTPUT} is stale: run `make generate`", file=sys.stderr)
            return 1
        return 0
    path.write_text(text)
    print(f"gen_openapi: {OUTPUT} written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
