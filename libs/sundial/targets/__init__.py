"""Target callers: HTTP and gRPC, the SSRF rules, outcome classification, breakers.

A library, not part of a service: the executor calls runs' targets through it and the
API's notifier its notification targets, under the same connect-time address checks.
"""

from sundial.targets.address import (
    AddressPolicy,
    CallRules,
    TargetForbidden,
    TargetRefused,
    split_host_port,
)
from sundial.targets.breaker import CircuitBreaker
from sundial.targets.classify import classify_grpc, classify_http, parse_retry_after
from sundial.targets.grpc import TARGET_ANSWER_MAX_BYTES, GrpcCaller, target_message_limits
from sundial.targets.http import HttpCaller, breaker_key

__all__ = [
    "TARGET_ANSWER_MAX_BYTES",
    "AddressPolicy",
    "CallRules",
    "CircuitBreaker",
    "GrpcCaller",
    "HttpCaller",
    "TargetForbidden",
    "TargetRefused",
    "breaker_key",
    "classify_grpc",
    "classify_http",
    "parse_retry_after",
    "split_host_port",
    "target_message_limits",
]
