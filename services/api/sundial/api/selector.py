"""Which jobs a request names by filters: label selectors, substring search, the rest.

A label selector has the syntax of Kubernetes label selectors (bulk.proto, SELECTORS):
comma-separated requirements that must all hold, each ``key=value`` (or ``==``),
``key!=value``, ``key in (a,b)``, ``key notin (a,b)``, ``key`` or ``!key``. The
grammar is small and fixed, and no maintained Python package parses it (the Kubernetes
client leaves selectors to the server), so it is parsed here, under bounds that keep
what one tenant sends cheap to parse and to run: 1,024 characters, 32 requirements, 64
values per set.

A selector becomes two SQL parameters (docs/design.md section 13): the labels every
matching job must carry with one value (``key=value``, a one-value ``in``), as a
document for ``@>`` through the tenant-keyed GIN index, and the rest as one SQL/JSON
path predicate (``@@``) checked on the rows the index (or the tenant's own jobs) gave.
Values travel as JSON string literals inside the path, never as SQL text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sundial.api import validation
from sundial.api.model import LabelSelector, Requirement
from sundial.core.errors import InvalidArgument

MAX_SELECTOR_CHARS = 1024
MAX_REQUIREMENTS = 32
MAX_SET_VALUES = 64
MAX_SEARCH_CHARS = 200

_LABEL_KEY = re.compile(r"[a-z0-9_./-]{1,63}")
_TOKEN = re.compile(r"\s*(?:(==|!=|=|!|,|\(|\))|([^\s,()=!]+))")


def _fail(message: str, fieldname: str) -> InvalidArgument:
    return InvalidArgument(fieldname, message)


def parse_selector(text: str, fieldname: str = "selector") -> LabelSelector:
    """The selector ``text`` (empty: no requirement).

    Raises:
        InvalidArgument: naming ``fieldname``: malformed, or past a bound.
    """
    if len(text) > MAX_SELECTOR_CHARS:
        raise _fail(f"longer than {MAX_SELECTOR_CHARS} characters ({len(text)})", fieldname)
    tokens: list[str] = []
    position = 0
    stripped = text.rstrip()
    while position < len(stripped):
        match = _TOKEN.match(stripped, position)
        if match is None:  # pragma: no cover - every character starts some token
            raise _fail(f"unexpected text at character {position + 1}", fieldname)
        tokens.append(match.group(1) or match.group(2))
        position = match.end()
    if not tokens:
        return LabelSelector()
    reader = _Reader(tokens, fieldname)
    requirements = [reader.requirement()]
    while reader.more():
        reader.expect(",")
        requirements.append(reader.requirement())
        if len(requirements) > MAX_REQUIREMENTS:
            raise _fail(f"at most {MAX_REQUIREMENTS} requirements", fieldname)
    return LabelSelector(tuple(requirements))


@dataclass
class _Reader:
    tokens: list[str]
    fieldname: str
    at: int = field(default=0)

    def more(self) -> bool:
        return self.at < len(self.tokens)

    def peek(self) -> str | None:
        return self.tokens[self.at] if self.more() else None

    def take(self) -> str:
        if not self.more():
            raise _fail("ends in the middle of a requirement", self.fieldname)
        self.at += 1
        return self.tokens[self.at - 1]

    def expect(self, token: str) -> None:
        got = self.take()
        if got != token:
            raise _fail(f"expected {token!r}, got {got!r}", self.fieldname)

    def key(self) -> str:
        key = self.take()
        if not _LABEL_KEY.fullmatch(key):
            raise _fail(
                f"{key!r} is not a label key (1-63 characters of a-z, 0-9, '_', '.', '-', '/')",
                self.fieldname,
            )
        return key

    def value(self) -> str:
        # An empty value (`key=` or `key in (a,)`) is allowed, as in Kubernetes.
        if self.peek() in (",", ")", None):
            return ""
        value = self.take()
        if value in ("=", "==", "!=", "!", "("):
            raise _fail(f"expected a value, got {value!r}", self.fieldname)
        if len(value) > validation.MAX_LABEL_VALUE_CHARS:
            raise _fail(
                f"a value is longer than {validation.MAX_LABEL_VALUE_CHARS} characters",
                self.fieldname,
            )
        return value

    def requirement(self) -> Requirement:
        if self.peek() == "!":
            self.take()
            return Requirement(self.key(), "!exists")
        key = self.key()
        op = self.peek()
        if op in (None, ","):
            return Requirement(key, "exists")
        self.take()
        if op in ("=", "=="):
            return Requirement(key, "in", (self.value(),))
        if op == "!=":
            return Requirement(key, "notin", (self.value(),))
        if op in ("in", "notin"):
            self.expect("(")
            if self.peek() == ")":
                raise _fail(f"the set of {key!r} is empty", self.fieldname)
            values = [self.value()]
            while self.peek() == ",":
                self.take()
                values.append(self.value())
                if len(values) > MAX_SET_VALUES:
                    raise _fail(f"at most {MAX_SET_VALUES} values in a set", self.fieldname)
            self.expect(")")
            return Requirement(key, op, tuple(dict.fromkeys(values)))
        raise _fail(
            f"expected '=', '==', '!=', 'in' or 'notin' after {key!r}, got {op!r}", self.fieldname
        )


def check_search(text: str, fieldname: str = "search") -> str:
    """A search text: at most 200 characters, no control characters."""
    validation.check_text(text, fieldname, MAX_SEARCH_CHARS)
    if "\n" in text or "\t" in text or "\r" in text:
        raise _fail("must be one line", fieldname)
    return text
