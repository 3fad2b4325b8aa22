"""The run statuses the named SQL spells, checked against ``sundial.run``'s vocabulary.

Every status literal in the API's and the scheduler's ``queries.sql`` must be a
``RunStatus`` value, and every status list (``status IN (...)``) one of the vocabulary's
named sets (``sundial.run.STATUS_SETS``): a misspelt status, or a list that lost or
gained one, fails here instead of silently matching no row (docs/design.md section 5).
"""

from __future__ import annotations

import re

import pytest

from sundial.api.store import queries as api_queries
from sundial.run import STATUS_SETS, RunStatus
from sundial.scheduler.store import queries as scheduler_queries

# As the stores load them (with the shared fragments of sundial/run/cancel.sql spliced).
FILES = {"api": api_queries, "scheduler": scheduler_queries}

# A status column (job_runs.status, or an alias's: r.status, u.status) compared with one
# literal, listed, or set; and the CASE arms that write one.
_COMPARED = re.compile(r"\b(?:\w+\.)?status\s*(?:=|<>|!=)\s*'([^']*)'")
_LISTED = re.compile(r"\b(?:\w+\.)?status\s+(?:NOT\s+)?IN\s*\(([^)]*)\)", re.IGNORECASE)
_CASE_ARM = re.compile(r"\b(?:THEN|ELSE)\s+'([^']*)'", re.IGNORECASE)
_STATUS_CASE = re.compile(r"\bstatus\s*=\s*CASE\b(.*?)\bEND\b", re.IGNORECASE | re.DOTALL)
_LITERAL = re.compile(r"'([^']*)'")

VALUES = {status.value for status in RunStatus}
SETS = {frozenset(s.value for s in members): name for name, members in STATUS_SETS.items()}

# Tables whose "status" is not a run's (none today): name -> why.
_OTHER_STATUS: dict[str, str] = {}


def _code(sql: str) -> str:
    """``sql`` without its comments (they quote statuses in prose)."""
    return "\n".join(line.split("--", 1)[0] for line in sql.splitlines())


def _named() -> list[tuple[str, str, str]]:
    return [
        (origin, name, _code(queries[name]))
        for origin, queries in FILES.items()
        for name in queries
        if name not in _OTHER_STATUS
    ]


@pytest.mark.parametrize(("origin", "name", "sql"), _named(), ids=lambda v: str(v)[:40])
def test_every_status_the_sql_spells_is_in_the_vocabulary(origin: str, name: str, sql: str) -> None:
    spelt = set(_COMPARED.findall(sql))
    for arms in _STATUS_CASE.findall(sql):
        spelt |= set(_CASE_ARM.findall(arms))
    for listed in _LISTED.findall(sql):
        members = set(_LITERAL.findall(listed))
        spelt |= members
        assert frozenset(members) in SETS, (
            f"{origin} {name}: status list {sorted(members)} is none of sundial.run's "
            f"named sets {sorted(STATUS_SETS)}"
        )
    assert spelt <= VALUES, f"{origin} {name}: {sorted(spelt - VALUES)} are not RunStatus values"


def test_the_checks_see_the_statements_that_matter() -> None:
    """The patterns find what they must (a pattern that matched nothing would pass all)."""
    api, scheduler = FILES["api"], FILES["scheduler"]
    assert _LISTED.search(_code(api["cancel_run"]))
    assert _LISTED.search(_code(scheduler["cancel_other_runs"]))
    assert _STATUS_CASE.search(_code(api["cancel_runs_of_job"]))
    assert _COMPARED.search(_code(scheduler["cancel_other_runs"]))
    wrong = "UPDATE job_runs SET status = 'canceled' WHERE status IN ('pending', 'queud')"
    assert set(_COMPARED.findall(wrong)) == {"canceled"}
    assert set(_LITERAL.findall(_LISTED.findall(wrong)[0])) == {"pending", "queud"}


def test_every_named_set_holds_statuses() -> None:
    for name, members in STATUS_SETS.items():
        assert members and all(isinstance(m, RunStatus) for m in members), name
