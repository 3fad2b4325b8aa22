"""Secret references in a target's headers and metadata (docs/design.md section 7,
"Secrets"): their form, what reads show, and what an attempt's grant carries.

A header or metadata value references a tenant secret as ``${secret:<name>}`` (a name
as a calendar's: 1-63 chars of ``[a-z0-9-]``, a letter first, not ``-`` last); the rest
of the value is literal (``Bearer ${secret:crm-token}``). Stored targets keep the
references; only :func:`resolve_target`, called where the ledger builds a grant, puts
values in their place.

A header whose name says it holds a credential (:func:`is_sensitive`) must reference a
secret: an inline value is refused at write time (:func:`inline_credential`), and one
stored before secrets existed is shown as :data:`REDACTED` by every read
(:func:`redacted`), while calls keep sending it until the target is rewritten.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping

from sundial.run._target import HttpTarget, Target

__all__ = [
    "REDACTED",
    "SECRET_NAME",
    "SecretReferenceError",
    "inline_credential",
    "is_sensitive",
    "redacted",
    "references",
    "resolve_target",
    "target_references",
]

REDACTED = "<redacted>"
"""What reads show in place of an inline credential stored before secrets existed."""

SECRET_NAME = re.compile(r"[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?")
"""A secret's name (AIP-122, as a calendar's)."""

_REFERENCE = re.compile(r"\$\{secret:([^}]*)\}")
_OPENING = "${secret:"

# Header and metadata names that carry credentials by convention; a name containing one
# of these words is sensitive too (x-api-key, x-auth-token, x-hub-signature...).
_SENSITIVE_NAMES = frozenset({"authorization", "proxy-authorization", "cookie"})
_SENSITIVE_WORDS = (
    "auth",
    "token",
    "secret",
    "password",
    "passwd",
    "api-key",
    "apikey",
    "api_key",
    "credential",
    "session",
    "signature",
    "private",
)


class SecretReferenceError(ValueError):
    """A value holds a malformed reference; the message says what, never the value."""


def is_sensitive(name: str) -> bool:
    """Whether a header or metadata ``name`` conventionally carries a credential."""
    lowered = name.lower()
    return lowered in _SENSITIVE_NAMES or any(word in lowered for word in _SENSITIVE_WORDS)


def references(value: str) -> list[str]:
    """The secret names ``value`` references, in order.

    Raises:
        SecretReferenceError: ``${secret:`` not closed, or closed around a malformed name.
    """
    names = []
    for match in _REFERENCE.finditer(value):
        name = match.group(1)
        if not SECRET_NAME.fullmatch(name):
            raise SecretReferenceError(
                "references a secret by a malformed name (1-63 chars of a-z, 0-9 and '-', "
                "a letter first): write ${secret:<name>}"
            )
        names.append(name)
    if value.count(_OPENING) != len(names):
        raise SecretReferenceError("has '${secret:' without its closing '}'")
    return names


def _entries(target: Target) -> Mapping[str, str]:
    return target.headers if isinstance(target, HttpTarget) else target.metadata


def _with_entries(target: Target, entries: dict[str, str]) -> Target:
    if isinstance(target, HttpTarget):
        return dataclasses.replace(target, headers=entries)
    return dataclasses.replace(target, metadata=entries)


def target_references(targets: Iterable[Target | None]) -> frozenset[str]:
    """Every secret name the targets' headers or metadata reference (malformed
    references are skipped: stored targets were checked when written)."""
    found: set[str] = set()
    for target in targets:
        if target is None:
            continue
        for value in _entries(target).values():
            if _OPENING in value:
                found.update(m.group(1) for m in _REFERENCE.finditer(value))
    return frozenset(found)


def inline_credential(name: str, value: str) -> bool:
    """Whether a header ``name: value`` is a credential written inline (a sensitive name
    whose value references no secret), which writes refuse."""
    return is_sensitive(name) and _OPENING not in value


def redacted(target: Target) -> Target:
    """``target`` as reads show it: an inline credential (stored before secrets) is
    :data:`REDACTED`; references are shown as written."""
    entries = _entries(target)
    if not any(inline_credential(k, v) for k, v in entries.items()):
        return target
    return _with_entries(
        target, {k: REDACTED if inline_credential(k, v) else v for k, v in entries.items()}
    )


def resolve_target(target: Target, values: Mapping[str, str]) -> tuple[Target, list[str]]:
    """``target`` with every reference replaced by its secret's value, for one grant.

    Returns:
        The resolved target, and the names of the headers left out because a secret they
        reference is missing (deleted after the job was written): such a header is not
        sent at all, rather than sent with the reference in it.
    """
    entries = _entries(target)
    if not any(_OPENING in v for v in entries.values()):
        return target, []
    resolved: dict[str, str] = {}
    dropped: list[str] = []
    for key, value in entries.items():
        if _OPENING not in value:
            resolved[key] = value
            continue
        names = [m.group(1) for m in _REFERENCE.finditer(value)]
        if any(n not in values for n in names):
            dropped.append(key)
            continue
        resolved[key] = _REFERENCE.sub(lambda m: values[m.group(1)], value)
    return _with_entries(target, resolved), dropped
