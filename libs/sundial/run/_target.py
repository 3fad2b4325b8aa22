"""What a run calls: one target shape for every service (job.proto ``Target``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["GrpcTarget", "HttpTarget", "Target"]


@dataclass(frozen=True, slots=True)
class HttpTarget:
    """An HTTP(S) call (job.proto ``HttpTarget``): the payload is the body."""

    url: str
    method: str = "POST"
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class GrpcTarget:
    """A call to ``sundial.v1.TargetService/Execute`` (job.proto ``GrpcTarget``)."""

    address: str
    plaintext: bool = False
    metadata: Mapping[str, str] = field(default_factory=dict)


Target = HttpTarget | GrpcTarget
