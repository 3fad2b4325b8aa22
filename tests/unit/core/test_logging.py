"""Structured logging: one JSON object per line, extras and context ids, tracebacks."""

from __future__ import annotations

import io
import json
import logging
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from opentelemetry.sdk.trace import TracerProvider

from sundial.core.config import LogConfig
from sundial.core.logging import QUIET_LOGGERS, configure_logging, request_id_var, run_key_var


@pytest.fixture
def capture() -> Iterator[tuple[io.StringIO, logging.Logger]]:
    root = logging.getLogger()
    level = root.level
    stream = io.StringIO()
    handler = configure_logging(LogConfig(log_level="DEBUG", log_format="json"), stream=stream)
    yield stream, logging.getLogger("sundial.test")
    root.removeHandler(handler)
    root.setLevel(level)


def _lines(stream: io.StringIO, logger: str = "sundial.test") -> list[dict[str, object]]:
    """The lines of ``logger`` and its children. The handler is the root's, at DEBUG, so
    other loggers write into it too: pytest-asyncio's event loop, set up after this
    fixture, logs asyncio's "Using selector" there, and counting every line made the
    span test fail in a fresh-clone run."""
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    return [
        line
        for line in lines
        if line["logger"] == logger or str(line["logger"]).startswith(logger + ".")
    ]


def test_one_json_object_per_line_with_base_fields_and_extras(
    capture: tuple[io.StringIO, logging.Logger],
) -> None:
    stream, log = capture
    job_id = uuid.uuid4()
    log.info(
        "dispatched %d runs",
        3,
        extra={"action": "dispatch", "job_id": job_id, "at": datetime(2030, 1, 1, tzinfo=UTC)},
    )
    [line] = _lines(stream)
    assert line["level"] == "INFO"
    assert line["logger"] == "sundial.test"
    assert line["msg"] == "dispatched 3 runs"
    assert line["action"] == "dispatch"
    assert line["job_id"] == str(job_id)
    assert line["at"] == "2030-01-01T00:00:00+00:00"
    assert isinstance(line["ts"], str) and line["ts"].endswith("Z")
    datetime.fromisoformat(line["ts"].replace("Z", "+00:00"))
    assert "request_id" not in line


def test_context_ids_are_added_and_explicit_extras_win(
    capture: tuple[io.StringIO, logging.Logger],
) -> None:
    stream, log = capture
    request_token = request_id_var.set("req-1")
    run_token = run_key_var.set("job@2030-01-01T00:00:00Z")
    try:
        log.info("inside")
        log.info("explicit", extra={"request_id": "req-2"})
    finally:
        request_id_var.reset(request_token)
        run_key_var.reset(run_token)
    log.info("outside")
    inside, explicit, outside = _lines(stream)
    assert inside["request_id"] == "req-1"
    assert inside["run_key"] == "job@2030-01-01T00:00:00Z"
    assert explicit["request_id"] == "req-2"
    assert "request_id" not in outside and "run_key" not in outside


def test_exceptions_carry_error_and_traceback(capture: tuple[io.StringIO, logging.Logger]) -> None:
    stream, log = capture
    try:
        raise ValueError("bad thing")
    except ValueError:
        log.exception("failed", extra={"action": "sweep"})
    [line] = _lines(stream)
    assert line["level"] == "ERROR"
    assert line["error"] == "ValueError: bad thing"
    assert isinstance(line["traceback"], str)
    assert line["traceback"].startswith("Traceback (most recent call last)")
    assert "ValueError: bad thing" in line["traceback"]


def test_extras_named_like_base_fields_do_not_overwrite_them(
    capture: tuple[io.StringIO, logging.Logger],
) -> None:
    stream, log = capture
    log.warning("real", extra={"level": "fake", "ts": 1})
    [line] = _lines(stream)
    assert line["level"] == "WARNING"
    assert line["extra_level"] == "fake"
    assert line["extra_ts"] == 1


def test_unserialisable_extras_fall_back_to_repr(
    capture: tuple[io.StringIO, logging.Logger],
) -> None:
    stream, log = capture
    log.info("odd", extra={"thing": object(), "raw": b"\x01\x02", "ids": {"b", "a"}})
    [line] = _lines(stream)
    assert str(line["thing"]).startswith("<object object")
    assert line["raw"] == "0102"
    assert line["ids"] == ["'a'", "'b'"] or line["ids"] == ["a", "b"]


def test_reconfiguring_replaces_the_handler_and_honours_the_level() -> None:
    root = logging.getLogger()
    level = root.level
    first, second = io.StringIO(), io.StringIO()
    configure_logging(LogConfig(log_format="json"), stream=first)
    handler = configure_logging(LogConfig(log_level="WARNING", log_format="text"), stream=second)
    try:
        log = logging.getLogger("sundial.test")
        log.info("hidden")
        log.warning("shown", extra={"action": "x", "count": 2})
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    # Only this test's own logger is counted (see _lines): other threads may log too.
    assert "sundial.test" not in first.getvalue()
    [text] = [line for line in second.getvalue().splitlines() if " sundial.test: " in line]
    assert "WARNING sundial.test: shown" in text
    assert "action=x count=2" in text


def test_lines_inside_a_span_carry_its_trace_and_span_ids(
    capture: tuple[io.StringIO, logging.Logger],
) -> None:
    stream, log = capture
    tracer = TracerProvider().get_tracer("test")  # a recording tracer, not the global one
    with tracer.start_as_current_span("run") as span:
        log.info("inside")
        with tracer.start_as_current_span("call") as child:
            log.info("nested")
    log.info("outside")
    inside, nested, outside = _lines(stream)
    context = span.get_span_context()
    assert inside["trace_id"] == format(context.trace_id, "032x")
    assert inside["span_id"] == format(context.span_id, "016x")
    assert nested["trace_id"] == inside["trace_id"]
    assert nested["span_id"] == format(child.get_span_context().span_id, "016x")
    assert "trace_id" not in outside and "span_id" not in outside


def test_chatty_libraries_are_quiet_unless_debugging() -> None:
    root = logging.getLogger()
    level = root.level
    stream = io.StringIO()
    configure_logging(LogConfig(log_level="INFO"), stream=stream)
    try:
        logging.getLogger("aiohttp.access").info("GET /hook 200")
        logging.getLogger("aiohttp.client").info("connection pool full")
        logging.getLogger("aiohttp.client").warning("a real problem")
        assert [line["msg"] for line in _lines(stream, "aiohttp")] == ["a real problem"]
        configure_logging(LogConfig(log_level="DEBUG"), stream=stream)
        logging.getLogger("aiohttp.client").info("now shown")
        assert _lines(stream, "aiohttp")[-1]["msg"] == "now shown"
    finally:
        for current in list(root.handlers):
            if getattr(current, "_sundial_handler", False):
                root.removeHandler(current)
        root.setLevel(level)
        for name in QUIET_LOGGERS:
            logging.getLogger(name).setLevel(logging.NOTSET)
