"""The soak's report: the per-fault table, the fault windows, the evidence, as text."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from tests.fault.soak._checks import TOTAL, Findings

_COLUMNS = (
    ("fault", "<", 30),
    ("n", ">", 3),
    ("expected", ">", 8),
    ("lost", ">", 5),
    ("double", ">", 6),
    ("stale", ">", 5),
    ("reissued", ">", 8),
    ("dup calls", ">", 9),
    ("max late s", ">", 10),
    ("p99 late s", ">", 10),
    ("max drain s", ">", 11),
)


def _seconds(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.2f}"


def _line(cells: Sequence[str]) -> str:
    return "  ".join(
        f"{cell:{align}{width}}" for cell, (_, align, width) in zip(cells, _COLUMNS, strict=True)
    ).rstrip()


def table(findings: Findings) -> str:
    """One row per fault kind that happened, then ``none`` and the total."""
    lines = [_line([name for name, _, _ in _COLUMNS])]
    for bucket in findings.buckets.values():
        if bucket.name == TOTAL:
            lines.append(_line(["-" * width for _, _, width in _COLUMNS]))
        lines.append(
            _line(
                [
                    bucket.name,
                    str(bucket.windows) if bucket.windows else "",
                    str(bucket.expected),
                    str(bucket.lost),
                    str(bucket.double),
                    str(bucket.stale),
                    str(bucket.reissued),
                    str(bucket.dup_calls),
                    _seconds(bucket.max_lateness_s),
                    _seconds(bucket.p99_lateness_s),
                    _seconds(bucket.max_drain_s),
                ]
            )
        )
    return "\n".join(lines)


def render(
    title: str,
    findings: Findings,
    *,
    facts: Mapping[str, object],
    phase_start: float,
) -> str:
    """The whole report: what ran, the table, each window, the evidence of violations."""
    out = [title, ""]
    out.extend(f"{name}: {value}" for name, value in facts.items())
    out += ["", table(findings), "", "fault windows (seconds from the fault phase's start):"]
    for window, occurrences, late, drain in findings.windows:
        out.append(
            f"  {window.start - phase_start:7.1f} .. {window.end - phase_start:7.1f}  "
            f"{window.kind.value:<30} {window.victim:<18} occurrences {occurrences:5d}  "
            f"max late {_seconds(late):>6} s  drain {_seconds(drain):>6} s"
            + (f"  ({window.note})" if window.note else "")
        )
    for what, lines in findings.examples.items():
        out += ["", f"{what} (first {len(lines)}):", *(f"  {line}" for line in lines)]
    return "\n".join(out) + "\n"
