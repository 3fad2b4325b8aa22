"""Structured logs: one JSON object per line, with the ids of the work being done.

Every record carries ``ts`` (UTC, RFC 3339, milliseconds), ``level``, ``logger`` and
``msg``, then every field passed with ``extra=`` (by convention an ``action`` and the ids
involved: ``job_id``, ``run_key``, ``component``...), then ``request_id`` and ``run_key``
taken from the context variables below when the call did not pass them, and inside an
OpenTelemetry span its ``trace_id`` and ``span_id``. A record with an
exception adds ``error`` (type and message) and ``traceback``.

Usage::

    log = logging.getLogger(__name__)
    log.info("dispatched batch", extra={"action": "dispatch", "partition": 7, "runs": 120})

The gRPC interceptor sets :data:`request_id_var` for each RPC; the executor sets
:data:`run_key_var` while it works on a run, so every line logged underneath (by any
library) carries it without being passed down.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import logging
import sys
import traceback
import uuid
from contextvars import ContextVar
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from opentelemetry import trace

from sundial.core.config import LogConfig

__all__ = [
    "ContextFilter",
    "JsonFormatter",
    "TextFormatter",
    "configure_logging",
    "request_id_var",
    "run_key_var",
]

request_id_var: ContextVar[str | None] = ContextVar("sundial_request_id", default=None)
"""The id of the RPC being served (from ``x-request-id`` metadata, or a new uuid4)."""

run_key_var: ContextVar[str | None] = ContextVar("sundial_run_key", default=None)
"""The run key (``<job_id>@<scheduled_at>``) of the run being worked on, if any.

Named after the run key because a run has no other id: docs/design.md section 1.
"""

_CONTEXT_VARS: tuple[tuple[str, ContextVar[str | None]], ...] = (
    ("request_id", request_id_var),
    ("run_key", run_key_var),
)

# Attributes every LogRecord has; anything else on a record came from `extra=`.
_RECORD_ATTRS = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", None, None)).keys() | {"message", "asctime"}
)
_BASE_KEYS = ("ts", "level", "logger", "msg")

QUIET_LOGGERS = ("aiohttp.access", "aiohttp.client", "aiohttp.internal", "hpack", "nats")
"""Third-party loggers held at WARNING (their per-call INFO lines drown the services')."""
_HANDLER_MARK = "_sundial_handler"


class ContextFilter(logging.Filter):
    """Copies the context variables onto each record as it is emitted.

    A handler filter runs synchronously inside the logging call, so it sees the caller's
    context; the formatter can then treat the ids like any other ``extra`` field.
    An explicit ``extra={"request_id": ...}`` wins over the context variable.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        for name, var in _CONTEXT_VARS:
            value = var.get()
            if value is not None and not hasattr(record, name):
                setattr(record, name, value)
        # Inside a span (OpenTelemetry's current context): its ids, in the W3C hex form
        # trace backends search by, so a line leads to its trace and back.
        context = trace.get_current_span().get_span_context()
        if context.is_valid and not hasattr(record, "trace_id"):
            record.trace_id = format(context.trace_id, "032x")
            record.span_id = format(context.span_id, "016x")
        return True


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {
        key: value
        for key, value in record.__dict__.items()
        if key not in _RECORD_ATTRS and not key.startswith("_")
    }


def _timestamp(record: logging.LogRecord) -> str:
    moment = datetime.fromtimestamp(record.created, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _jsonable(value: Any) -> Any:
    """``json.dumps`` fallback for the types our ``extra`` fields actually hold."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, uuid.UUID | Path):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return repr(value)


class JsonFormatter(logging.Formatter):
    """Formats a record as one line of JSON (see the module docstring for the fields)."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": _timestamp(record),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in _extras(record).items():
            # An extra named like a base key must not overwrite it, nor be lost.
            doc[f"extra_{key}" if key in _BASE_KEYS else key] = value
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            doc["error"] = f"{type(exc).__name__}: {exc}"
            doc["traceback"] = "".join(traceback.format_exception(*record.exc_info)).rstrip()
        elif record.exc_text:
            doc["traceback"] = record.exc_text
        if record.stack_info:
            doc["stack"] = record.stack_info
        return json.dumps(doc, default=_jsonable, ensure_ascii=False, separators=(",", ":"))


class TextFormatter(logging.Formatter):
    """A human-readable line for a terminal: ``ts LEVEL logger: msg key=value ...``."""

    def format(self, record: logging.LogRecord) -> str:
        line = f"{_timestamp(record)} {record.levelname:<7} {record.name}: {record.getMessage()}"
        fields = " ".join(
            f"{key}={_jsonable(value) if not isinstance(value, str | int | float) else value}"
            for key, value in _extras(record).items()
        )
        if fields:
            line = f"{line}  {fields}"
        if record.exc_info and record.exc_info[1] is not None:
            line = f"{line}\n{self.formatException(record.exc_info)}"
        if record.stack_info:
            line = f"{line}\n{record.stack_info}"
        return line


def configure_logging(config: LogConfig, *, stream: TextIO | None = None) -> logging.Handler:
    """Send every log record to ``stream`` (stderr) in the configured format.

    Installs one handler on the root logger and sets the root level. Calling it again
    replaces the handler it installed before (and leaves other handlers, such as
    pytest's, alone), so tests and ``sundial dev`` can reconfigure freely.

    Args:
        config: Level and format.
        stream: Where lines go; ``sys.stderr`` by default (read at call time, so
            redirected streams work).

    Returns:
        The installed handler.
    """
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, _HANDLER_MARK, False):
            root.removeHandler(handler)
            handler.close()
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    setattr(handler, _HANDLER_MARK, True)
    handler.addFilter(ContextFilter())
    handler.setFormatter(JsonFormatter() if config.log_format == "json" else TextFormatter())
    root.addHandler(handler)
    root.setLevel(config.log_level)
    # Libraries that log a line per call or per connection at INFO: quiet unless the
    # service itself is asked for DEBUG.
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(
            logging.NOTSET if config.log_level == "DEBUG" else logging.WARNING
        )
    return handler
