"""What PostgreSQL did for a benchmark's runs: its statements (``pg_stat_statements``)
and its table writes (``pg_stat_user_tables``: updates, HOT updates, indexes), per run.

The stack's PostgreSQL must load ``pg_stat_statements`` (:data:`SETTINGS`, passed as
``Stack(postgres_settings=...)``). :func:`reset` before the measured span,
:func:`statements` at its end (statement counters are shared at once), :func:`tables`
once the services that ran it stopped (a backend reports its table counters within
10 s of going idle, or when it exits).
"""

from __future__ import annotations

import re
from typing import Any

import asyncpg

SETTINGS = (
    "shared_preload_libraries=pg_stat_statements",
    "pg_stat_statements.max=2000",
    "pg_stat_statements.track=all",  # the statements inside the partition functions too
)

TOP_STATEMENTS = 15
"""Statements reported, by total execution time."""

# A run key's table and the tables of a day partition are reported as their parent.
_PARTITION = re.compile(r"_(\d{8}|default)$")
_LITERAL = re.compile(r"'(?:[^']|'')*'|\$\d+|\b\d+(?:\.\d+)?\b|\b(?:true|false|null)\b", re.I)
_COMMENT = re.compile(r"--[^\n]*")
_EXTRACT = re.compile(r"extract\(\s*\w+\s", re.I)  # its field is a constant to PostgreSQL


def _shape(sql: str) -> str:
    """A statement's text with comments, literals and parameters gone and blanks
    collapsed: how a named query and pg_stat_statements' normalised text are matched."""
    text = _LITERAL.sub("?", _EXTRACT.sub("extract(? ", _COMMENT.sub(" ", sql)))
    return " ".join(text.split()).rstrip(" ;").lower()


def _named_queries() -> dict[str, str]:
    """shape -> name of every named query of the scheduler and the API."""
    from sundial.api.store._base import queries as api  # noqa: PLC0415 (only when reporting)
    from sundial.core.auth._tokens import queries as auth  # noqa: PLC0415
    from sundial.scheduler.store._queries import queries as scheduler  # noqa: PLC0415

    names: dict[str, str] = {}
    for service, queries in (("scheduler", scheduler), ("api", api), ("auth", auth)):
        for name in queries:
            names.setdefault(_shape(queries[name]), f"{service}.{name}")
    return names


async def reset(conn: asyncpg.Connection) -> None:
    """Zero the statement and table counters of ``conn``'s database."""
    await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    await conn.execute("SELECT pg_stat_statements_reset()")
    await conn.execute("SELECT pg_stat_reset()")


async def statements(conn: asyncpg.Connection, runs: int) -> dict[str, Any]:
    """Since :func:`reset`, per run of ``runs``: the top statements by execution and
    planning time (calls, each time in microseconds, WAL bytes) and the totals of every
    statement."""
    rows = await conn.fetch(
        """
        SELECT s.query, s.toplevel, s.calls, s.total_exec_time, s.total_plan_time, s.rows,
               s.wal_bytes,
               s.shared_blks_hit + s.shared_blks_read AS blocks
          FROM pg_stat_statements s
         WHERE s.dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
           AND s.query NOT ILIKE '%pg_stat_%'
         ORDER BY s.total_exec_time + s.total_plan_time DESC
        """
    )
    names = _named_queries()
    top_level = [r for r in rows if r["toplevel"]]
    top = []
    for r in rows[:TOP_STATEMENTS]:
        shape = _shape(r["query"])
        top.append(
            {
                "name": names.get(shape) or shape[:70],
                "calls_per_run": round(r["calls"] / runs, 3),
                "us_per_run": round(r["total_exec_time"] * 1000 / runs, 1),
                "plan_us_per_run": round(r["total_plan_time"] * 1000 / runs, 1),
                "rows_per_call": round(r["rows"] / max(r["calls"], 1), 1),
                "wal_bytes_per_run": round(int(r["wal_bytes"]) / runs),
                "blocks_per_run": round(r["blocks"] / runs, 1),
            }
        )
    return {
        "statements": top,
        # The totals count top-level statements only: a function's statements (listed
        # above too, with track=all) are in its caller's times already.
        "total_us_per_run": round(sum(r["total_exec_time"] for r in top_level) * 1000 / runs, 1),
        "plan_us_per_run": round(sum(r["total_plan_time"] for r in rows) * 1000 / runs, 1),
        "calls_per_run": round(sum(r["calls"] for r in top_level) / runs, 2),
        "wal_bytes_per_run": round(sum(int(r["wal_bytes"]) for r in top_level) / runs),
    }


async def tables(conn: asyncpg.Connection, runs: int) -> dict[str, dict[str, Any]]:
    """Since :func:`reset`, per run of ``runs``: the writes of each table written (day
    partitions counted as their parent), with the HOT share of its updates and its
    index count, and how many times autovacuum vacuumed or analyzed it meanwhile (its
    workers' CPU is PostgreSQL's). The bare pipeline's tables are left out (measured on
    their own)."""
    rows = await conn.fetch(
        """
        SELECT t.relname, t.n_tup_ins, t.n_tup_upd, t.n_tup_hot_upd, t.n_tup_del, t.seq_scan,
               t.autovacuum_count + t.autoanalyze_count AS autovacuums,
               (SELECT count(*) FROM pg_index i WHERE i.indrelid = t.relid) AS indexes
          FROM pg_stat_user_tables t
         WHERE t.n_tup_ins + t.n_tup_upd + t.n_tup_del > 0 AND t.relname NOT LIKE 'bare\\_%'
        """
    )
    totals: dict[str, dict[str, int]] = {}
    for t in rows:
        entry = totals.setdefault(
            _PARTITION.sub("", t["relname"]),
            {"ins": 0, "upd": 0, "hot": 0, "del": 0, "indexes": 0, "autovacuums": 0, "seq": 0},
        )
        entry["ins"] += t["n_tup_ins"]
        entry["upd"] += t["n_tup_upd"]
        entry["hot"] += t["n_tup_hot_upd"]
        entry["del"] += t["n_tup_del"]
        entry["autovacuums"] += t["autovacuums"]
        entry["seq"] += t["seq_scan"]
        entry["indexes"] = max(entry["indexes"], t["indexes"])
    ordered = sorted(totals.items(), key=lambda kv: -(kv[1]["upd"] + kv[1]["ins"]))
    return {
        name: {
            "ins_per_run": round(v["ins"] / runs, 2),
            "upd_per_run": round(v["upd"] / runs, 2),
            "hot_ratio": round(v["hot"] / v["upd"], 2) if v["upd"] else None,
            "del_per_run": round(v["del"] / runs, 2),
            "indexes": v["indexes"],
            "autovacuums": v["autovacuums"],
            "seq_scans": v["seq"],
        }
        for name, v in ordered
    }


def render(values: dict[str, Any]) -> list[str]:
    """The collection as report lines."""
    lines = [
        f"PostgreSQL per run: {values['calls_per_run']} statements, "
        f"{values['total_us_per_run']} us executing, {values.get('plan_us_per_run', 0)} us "
        f"planning, {values['wal_bytes_per_run']} WAL bytes"
    ]
    heads = ("calls/run", "us/run", "plan us", "rows/call", "WAL B/run", "blks/run")
    lines.append(f"  {'statement':40s} " + " ".join(f"{h:>9s}" for h in heads))
    for s in values["statements"]:
        lines.append(
            f"  {s['name'][:40]:40s} {s['calls_per_run']:9.3f} {s['us_per_run']:9.1f} "
            f"{s.get('plan_us_per_run', 0):9.1f} {s['rows_per_call']:9.1f} "
            f"{s['wal_bytes_per_run']:9d} {s.get('blocks_per_run', 0):9.1f}"
        )
    if "tables" not in values:
        return lines
    heads = ("ins/run", "upd/run", "HOT", "del/run", "indexes", "autovac", "seqscans")
    lines.append(f"  {'table':40s} " + " ".join(f"{h:>9s}" for h in heads))
    for name, t in values["tables"].items():
        hot = "-" if t["hot_ratio"] is None else f"{t['hot_ratio']:.2f}"
        lines.append(
            f"  {name[:40]:40s} {t['ins_per_run']:9.2f} {t['upd_per_run']:9.2f} {hot:>9s} "
            f"{t['del_per_run']:9.2f} {t['indexes']:9d} {t['autovacuums']:9d} "
            f"{t.get('seq_scans', 0):9d}"
        )
    return lines
