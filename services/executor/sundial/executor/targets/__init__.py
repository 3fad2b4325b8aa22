"""Target callers: HTTP and gRPC, the SSRF rules, outcome classification, breakers."""

from sundial.executor.targets.address import (
    AddressPolicy,
    CallRules,
    TargetForbidden,
    TargetRefused,
    split_host_port,
)
from sundial.executor.targets.breaker import CircuitBreaker
from sundial.executor.targets.classify import classify_grpc, classify_http, parse_retry_after
from sundial.executor.targets.grpc import GrpcCaller
from sundial.executor.targets.http import HttpCaller, breaker_key

__all__ = [
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
]
