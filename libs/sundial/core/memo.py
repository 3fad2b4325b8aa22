"""Results computed once per input object, for the values many items of one request
share (a batch of 1,000 jobs converted from the wire shares a few schedule, target and
policy objects: finding them by identity costs no hashing, and works for values that
cannot be hashed, such as a target with a headers mapping)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

Memo = dict[int, tuple[Any, Any]]
"""Results by ``id`` of their input, each kept with its input: while the memo lives, the
input lives, so its id cannot be reused by another object."""


def per_object(memo: Memo, value: T, compute: Callable[[T], R]) -> R:
    """``compute(value)``, computed once per object ``value`` for the life of ``memo``
    (a failure is not kept: each caller sees it raised again)."""
    found = memo.get(id(value))
    if found is None:
        found = memo[id(value)] = (value, compute(value))
    result: R = found[1]
    return result
