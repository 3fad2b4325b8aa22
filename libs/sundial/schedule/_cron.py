"""Cron expressions: parse and validate with field-specific errors, expand Jenkins ``H``.

Grammar (case-insensitive; fields separated by ASCII whitespace)::

    expression := macro | [second] minute hour day-of-month month day-of-week
    macro      := @yearly | @annually | @monthly | @weekly | @daily | @midnight | @hourly
    field      := item ("," item)*
    item       := "*" ["/" step] | value ["-" value] ["/" step] | hashed
    hashed     := "H" ["(" n "-" n ")"] ["/" step]
    day-of-month extras:  "?"  "L" (last day, may appear in a list)  "nW" (alone)
    day-of-week extras:   "?"  "d#n" (n-th weekday d, n 1-5)  "dL" (last weekday d)

Ranges: second and minute 0-59, hour 0-23, day of month 1-31, month 1-12 or JAN-DEC,
day of week 0-7 or SUN-SAT (0 and 7 are Sunday; Unix/Spring numbering, *not* Quartz's
1-7). ``a/s`` means ``a-<max>/s``. Six fields put seconds first (Quartz/Spring).

Decisions the grammar alone does not make:

* Day of month and day of week combine as in Vixie cron, cronie, Debian's cron and
  robfig/cron (Kubernetes CronJob): when both are restricted (anything but ``*`` or
  ``?``) a day matches if either matches, unless one of them *starts with* ``*`` (or
  ``?``), such as ``*/2``: then both must match. So ``5 4 */2 * 1`` fires on odd-numbered
  Mondays, ``0 0 1 * 1`` on the 1st and on every Monday, and ``0 0 1-31/2 * 0`` on odd
  days and on Sundays. A restricted field that is the only restricted one counts alone.
  The expansion marks the both-must-match case with a trailing ``&`` (see
  :data:`DAYS_AND`), which :class:`~sundial.schedule._fire.WallCron` hands to croniter as
  ``day_or=False``.
* A reversed range is an error (``22-2``), except a day-of-week range ending in Sunday
  (``FRI-SUN``, ``5-0``), which means up to 7.
* A step must be between 1 and the field's size (``*/60`` in minutes is fine, ``*/61``
  is not).
* ``W`` and ``#``/``dL`` cannot be combined with a restricted other day field (croniter
  cannot evaluate the union correctly); ``LW`` and ``L-n`` are not supported.
* Macros are the plain Vixie expansions (``@daily`` is ``0 0 * * *``); they are not
  hashed. Use ``H H * * *`` to spread daily jobs.
* ``H`` is Jenkins-style and hashed from the job id with :func:`stable_hash` (one hash
  per field and item): ``H`` picks a value in the field's range (day of month 1-28, so
  it exists in every month), ``H(a-b)`` one in ``a-b``, ``H/s`` and ``H(a-b)/s`` a
  hashed start within the first step and then every ``s``.
* A field is a *wildcard* for the DST rules (``GapPolicy.AUTO``/``FoldPolicy.AUTO``)
  when, as in Vixie cron, its text starts with ``*`` (``*``, ``*/15``), or when it is
  ``H/s`` (a hashed step over the whole field, which behaves like ``*/s``). A schedule is
  *fixed-time* when neither its minute nor its hour field is a wildcard; a seconds field
  does not change that.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass

from sundial.core.errors import InvalidArgument

from ._digest import stable_hash

MAX_EXPRESSION_LENGTH = 512

MACROS: dict[str, str] = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

_MONTH_NAMES = {name.lower(): i for i, name in enumerate(calendar.month_abbr) if name}
_DOW_NAMES = {"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}

_SECOND, _MINUTE, _HOUR, _DOM, _MONTH, _DOW = range(6)


@dataclass(frozen=True, slots=True)
class _FieldKind:
    """Static facts about one cron field."""

    kind: int
    name: str
    lo: int
    hi: int
    # Range used by ``*`` steps and by ``H`` without a range (day of week stops at 6,
    # day of month at 28 for H so a hashed day exists in every month).
    star_hi: int
    hash_lo: int
    hash_hi: int
    names: dict[str, int] | None = None


_KINDS = (
    _FieldKind(_SECOND, "second", 0, 59, 59, 0, 59),
    _FieldKind(_MINUTE, "minute", 0, 59, 59, 0, 59),
    _FieldKind(_HOUR, "hour", 0, 23, 23, 0, 23),
    _FieldKind(_DOM, "day of month", 1, 31, 31, 1, 28),
    _FieldKind(_MONTH, "month", 1, 12, 12, 1, 12, _MONTH_NAMES),
    _FieldKind(_DOW, "day of week", 0, 7, 6, 0, 6, _DOW_NAMES),
)

_HASH_RE = re.compile(r"^h(?:\((\d+)-(\d+)\))?(?:/(.*))?$")
_NEAREST_WEEKDAY_RE = re.compile(r"^(\d+)w$")
_NTH_RE = re.compile(r"^([a-z0-9]+)#(.*)$")
_LAST_WEEKDAY_RE = re.compile(r"^([a-z0-9]+)l$")


@dataclass(frozen=True, slots=True)
class _HashItem:
    """An ``H`` item, expanded per job id."""

    index: int  # position in the field's list, so ``H,H`` hashes two values
    lo: int
    hi: int
    step: int | None


DAYS_AND = " &"
"""Suffix of an expanded expression whose day fields must both match (see the module
doc); not croniter syntax: :class:`~sundial.schedule._fire.WallCron` strips it."""


@dataclass(frozen=True, slots=True)
class CronField:
    """One parsed field.

    Attributes:
        kind: The field kind (index into the internal kinds table).
        text: The field as written (lower-cased).
        values: Plain values selected (day of week already folded: 7 -> 0).
        hashes: ``H`` items, resolved by :meth:`ParsedCron.expand`.
        unrestricted: The field is exactly ``*`` or ``?``.
        wildcard: The field counts as a wildcard for the DST rules (see module doc).
        last_day: Day of month contains ``L``.
        nearest_weekday: Day of month is ``nW``.
        nth_weekdays: Day-of-week ``d#n`` items as ``(d, n)``.
        last_weekdays: Day-of-week ``dL`` items as ``d``.
    """

    kind: int
    text: str
    values: frozenset[int]
    hashes: tuple[_HashItem, ...] = ()
    unrestricted: bool = False
    wildcard: bool = False
    last_day: bool = False
    nearest_weekday: int | None = None
    nth_weekdays: tuple[tuple[int, int], ...] = ()
    last_weekdays: tuple[int, ...] = ()

    @property
    def special_days(self) -> bool:
        """True if the field uses ``W``, ``#`` or ``dL`` (not plain value sets)."""
        return bool(self.nearest_weekday is not None or self.nth_weekdays or self.last_weekdays)


@dataclass(frozen=True, slots=True)
class ParsedCron:
    """A validated cron expression, independent of the job (``H`` not yet expanded).

    Attributes:
        expression: The expression as written (stripped).
        fields: Six fields in the order second, minute, hour, day of month, month, day
            of week; for a five-field expression the second field is ``{0}``.
        has_seconds: The expression had six fields.
        fixed_time: Neither the minute nor the hour field is a wildcard.
        uses_hash: Some field uses ``H``; expansion then depends on the job id.
    """

    expression: str
    fields: tuple[CronField, ...]
    has_seconds: bool
    fixed_time: bool
    uses_hash: bool

    def expand(self, job_id: str, *, field: str = "schedule.cron") -> str:
        """Resolve ``H`` for ``job_id`` and render a croniter expression.

        The rendering lists every value explicitly, in croniter's field order (seconds
        last), so none of croniter's own range or hash conventions apply: croniter only
        iterates naive wall-clock times for Sundial.

        Args:
            job_id: The job id ``H`` is hashed from (ignored without ``H``).
            field: Dotted field path for errors.

        Returns:
            A croniter expression, identical for every job when ``uses_hash`` is false.

        Raises:
            InvalidArgument: The expanded expression can never fire (e.g. day 30 of
                February).
        """
        resolved = [self._resolve(f, job_id) for f in self.fields]
        _check_possible_days(resolved, self, field)
        parts = [_render(f, v) for f, v in zip(self.fields, resolved, strict=True)]
        second, minute, hour, dom, month, dow = parts
        rendered = f"{minute} {hour} {dom} {month} {dow}"
        if self.has_seconds:
            rendered = f"{rendered} {second}"
        return rendered + DAYS_AND if self.days_and else rendered

    @property
    def days_and(self) -> bool:
        """Both day fields are restricted and one of them starts with ``*`` (or ``?``):
        a day must match both (Vixie cron, cronie), not either."""
        dom, dow = self.fields[_DOM], self.fields[_DOW]
        if dom.unrestricted or dow.unrestricted:
            return False
        return dom.text.startswith(("*", "?")) or dow.text.startswith(("*", "?"))

    @staticmethod
    def _resolve(f: CronField, job_id: str) -> frozenset[int]:
        if not f.hashes:
            return f.values
        values = set(f.values)
        name = _KINDS[f.kind].name
        for item in f.hashes:
            h = stable_hash("cron-h", job_id, name, str(item.index))
            span = item.hi - item.lo + 1
            if item.step is None:
                values.add(item.lo + h % span)
            else:
                start = item.lo + h % min(item.step, span)
                values.update(range(start, item.hi + 1, item.step))
        if f.kind == _DOW and 7 in values:
            values.discard(7)
            values.add(0)
        return frozenset(values)


def parse_cron(expression: str, *, field: str = "schedule.cron") -> ParsedCron:
    """Parse and validate a cron expression.

    Args:
        expression: The expression as the user wrote it.
        field: Dotted field path used in errors.

    Returns:
        The parsed expression.

    Raises:
        InvalidArgument: With a message naming the field number, its name and the
            problem, e.g. ``schedule.cron: field 2 (hour): value 25 out of range 0-23``.
    """
    if not isinstance(expression, str):
        raise InvalidArgument(field, f"must be a string, got {type(expression).__name__}")
    text = expression.strip()
    if not text:
        raise InvalidArgument(field, "must not be empty")
    if len(text) > MAX_EXPRESSION_LENGTH:
        raise InvalidArgument(field, f"longer than {MAX_EXPRESSION_LENGTH} characters")
    if not text.isascii():
        raise InvalidArgument(field, "must contain only ASCII characters")
    body = text.lower()
    if body.startswith("@"):
        body = _macro(body, field)
    tokens = body.split()
    if len(tokens) not in (5, 6):
        raise InvalidArgument(
            field,
            "expected 5 fields (minute hour day-of-month month day-of-week) or 6 with "
            f"seconds first, got {len(tokens)}",
        )
    has_seconds = len(tokens) == 6
    if not has_seconds:
        tokens = ["0", *tokens]
    fields = []
    for kind, token in zip(_KINDS, tokens, strict=True):
        # Positions in errors are those the user wrote (1-based, seconds first if present).
        position = kind.kind + 1 if has_seconds else kind.kind
        fields.append(_parse_field(token, kind, position, field))
    _check_day_combination(fields, has_seconds, field)
    return ParsedCron(
        expression=text,
        fields=tuple(fields),
        has_seconds=has_seconds,
        fixed_time=not (fields[_MINUTE].wildcard or fields[_HOUR].wildcard),
        uses_hash=any(f.hashes for f in fields),
    )


def _macro(body: str, field: str) -> str:
    if body in MACROS:
        return MACROS[body]
    if body == "@reboot":
        raise InvalidArgument(field, "@reboot is not supported (a schedule needs times)")
    if body.startswith("@every"):
        raise InvalidArgument(field, f"'{body}' is not supported; use an interval schedule")
    raise InvalidArgument(field, f"unknown macro '{body}' (supported: {', '.join(sorted(MACROS))})")


class _FieldError(Exception):
    """A problem within one field; turned into InvalidArgument with the field prefix."""


def _parse_field(token: str, kind: _FieldKind, position: int, field: str) -> CronField:
    try:
        return _parse_items(token, kind)
    except _FieldError as exc:
        raise InvalidArgument(field, f"field {position} ({kind.name}): {exc}") from None


def _parse_items(token: str, kind: _FieldKind) -> CronField:
    if token in ("*", "?"):
        if token == "?" and kind.kind not in (_DOM, _DOW):
            raise _FieldError("'?' is only allowed in day of month and day of week")
        return CronField(kind.kind, token, frozenset(_star(kind)), unrestricted=True, wildcard=True)
    items = token.split(",")
    values: set[int] = set()
    hashes: list[_HashItem] = []
    last_day = False
    nearest: int | None = None
    nth: list[tuple[int, int]] = []
    last_weekdays: list[int] = []
    for index, item in enumerate(items):
        if not item:
            raise _FieldError(f"empty item in list '{token}'")
        if item == "?":
            raise _FieldError("'?' must be the whole field")
        if kind.kind == _DOM and item == "l":
            last_day = True
        elif kind.kind == _DOM and item.startswith("l"):
            raise _FieldError(f"'{item.upper()}' is not supported (only L)")
        elif kind.kind == _DOM and (m := _NEAREST_WEEKDAY_RE.match(item)):
            if len(items) > 1:
                raise _FieldError("'W' must be the only item of the field")
            nearest = _number(m.group(1), kind)
        elif kind.kind == _DOM and item.endswith("w"):
            raise _FieldError(f"'{item.upper()}' is not supported (use nW, e.g. 15W)")
        elif kind.kind == _DOW and (m := _NTH_RE.match(item)):
            nth.append((_dow(m.group(1), kind), _nth(m.group(2))))
        elif kind.kind == _DOW and (m := _LAST_WEEKDAY_RE.match(item)):
            last_weekdays.append(_dow(m.group(1), kind))
        elif kind.kind == _DOW and item == "l":
            raise _FieldError("'L' needs a day in day of week, e.g. 5L for the last Friday")
        elif item.startswith("h"):
            hashes.append(_hash_item(item, index, kind))
        else:
            values.update(_range_item(item, kind))
    if (nth or last_weekdays) and (values or hashes):
        raise _FieldError("'#' and 'L' items cannot be mixed with plain days")
    if kind.kind == _DOW and 7 in values:
        values.discard(7)
        values.add(0)
    first = items[0]
    return CronField(
        kind=kind.kind,
        text=token,
        values=frozenset(values),
        hashes=tuple(hashes),
        wildcard=first.startswith("*") or (first.startswith("h/")),
        last_day=last_day,
        nearest_weekday=nearest,
        nth_weekdays=tuple(nth),
        last_weekdays=tuple(last_weekdays),
    )


def _star(kind: _FieldKind) -> range:
    return range(kind.lo, kind.star_hi + 1)


def _number(text: str, kind: _FieldKind) -> int:
    if text.isdigit():
        value = int(text)
    elif kind.names is not None and text in kind.names:
        return kind.names[text]
    else:
        raise _FieldError(f"invalid value '{text}'")
    if not kind.lo <= value <= kind.hi:
        raise _FieldError(f"value {value} out of range {kind.lo}-{kind.hi}")
    return value


def _dow(text: str, kind: _FieldKind) -> int:
    return _number(text, kind) % 7


def _nth(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 5:
        raise _FieldError(f"'#{text}' must be #1 to #5")
    return int(text)


def _step(text: str, kind: _FieldKind) -> int:
    size = kind.star_hi - kind.lo + 1
    if not text.isdigit():
        raise _FieldError(f"invalid step '{text}'")
    step = int(text)
    if not 1 <= step <= size:
        raise _FieldError(f"step {step} out of range 1-{size}")
    return step


def _range_item(item: str, kind: _FieldKind) -> range | list[int]:
    base, slash, step_text = item.partition("/")
    step = _step(step_text, kind) if slash else 1
    if base == "*":
        return range(kind.lo, kind.star_hi + 1, step)
    low_text, dash, high_text = base.partition("-")
    low = _number(low_text, kind)
    if dash:
        high = _number(high_text, kind)
    elif slash:
        high = kind.star_hi  # "a/s" is "a-<max>/s" (Quartz, croniter)
    else:
        return [low]
    if kind.kind == _DOW and high == 0 and low > 0:
        high = 7  # FRI-SUN: Sunday as the end of the week
    if low > high:
        raise _FieldError(
            f"range {low}-{high} is reversed (write {low}-{kind.hi},{kind.lo}-{high})"
        )
    return range(low, high + 1, step)


def _hash_item(item: str, index: int, kind: _FieldKind) -> _HashItem:
    m = _HASH_RE.match(item)
    if m is None:
        raise _FieldError(f"invalid value '{item.upper()}' (H, H(a-b), H/n or H(a-b)/n)")
    if m.group(1) is not None:
        lo, hi = int(m.group(1)), int(m.group(2))
        for bound in (lo, hi):
            if not kind.lo <= bound <= kind.hi:
                raise _FieldError(f"value {bound} out of range {kind.lo}-{kind.hi}")
        if lo > hi:
            raise _FieldError(f"range {lo}-{hi} in H({lo}-{hi}) is reversed")
    else:
        lo, hi = kind.hash_lo, kind.hash_hi
    step = _step(m.group(3), kind) if m.group(3) is not None else None
    return _HashItem(index=index, lo=lo, hi=hi, step=step)


def _check_day_combination(fields: list[CronField], has_seconds: bool, field: str) -> None:
    dom, dow = fields[_DOM], fields[_DOW]
    if dom.nearest_weekday is not None and not dow.unrestricted:
        position = _DOM + 1 if has_seconds else _DOM
        raise InvalidArgument(
            field,
            f"field {position} (day of month): 'W' cannot be combined with a restricted "
            "day of week (use * or ?)",
        )
    if (dow.nth_weekdays or dow.last_weekdays) and not dom.unrestricted:
        position = _DOW + 1 if has_seconds else _DOW
        raise InvalidArgument(
            field,
            f"field {position} (day of week): '#' and 'L' cannot be combined with a "
            "restricted day of month (use * or ?)",
        )


def _check_possible_days(resolved: list[frozenset[int]], parsed: ParsedCron, field: str) -> None:
    dom, dow = parsed.fields[_DOM], parsed.fields[_DOW]
    # With a restricted day of week the union can still match; L and W always exist.
    if dom.unrestricted or not dow.unrestricted or dom.last_day or dom.special_days:
        return
    months = sorted(resolved[_MONTH])
    longest = max(29 if m == 2 else calendar.monthrange(2001, m)[1] for m in months)
    first_day = min(resolved[_DOM])
    if first_day > longest:
        position = _DOM + 1 if parsed.has_seconds else _DOM
        names = ",".join(calendar.month_abbr[m].upper() for m in months)
        raise InvalidArgument(
            field,
            f"field {position} (day of month): day {first_day} never occurs in {names}",
        )


def _render(f: CronField, values: frozenset[int]) -> str:
    kind = _KINDS[f.kind]
    if f.unrestricted:
        return "*"
    if f.kind == _DOM:
        if f.nearest_weekday is not None:
            return f"{f.nearest_weekday}w"
        tokens = [str(v) for v in sorted(values)]
        if f.last_day:
            tokens.append("l")
        return ",".join(tokens)
    if f.kind == _DOW and (f.nth_weekdays or f.last_weekdays):
        tokens = [f"{d}#{n}" for d, n in sorted(set(f.nth_weekdays))]
        tokens += [f"l{d}" for d in sorted(set(f.last_weekdays))]
        return ",".join(tokens)
    if f.kind != _DOW and len(values) == kind.star_hi - kind.lo + 1:
        # Every value: "*" is equivalent here (no OR semantics outside the day fields)
        # and lets croniter skip the field.
        return "*"
    return ",".join(str(v) for v in sorted(values))
