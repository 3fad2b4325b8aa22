"""Reaching the local stack's NATS from tests with the credentials it issued."""

from __future__ import annotations

from typing import Any

from sundial.devstack import Stack


def nats_options(stack: Stack, role: str = "admin") -> dict[str, Any]:
    """``nats.connect`` keyword arguments for the stack's NATS as ``role`` (admin: any
    subject; scheduler, executor: what those services may do)."""
    config = stack.nats_config(role)
    options: dict[str, Any] = {
        "servers": [config.nats_url],
        "inbox_prefix": config.nats_inbox_prefix,
    }
    if config.nats_user:
        options.update(user=config.nats_user, password=config.nats_password)
    return options
