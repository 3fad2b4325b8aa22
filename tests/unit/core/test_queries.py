"""The named-SQL loader: parsing, lookup by key and attribute, and its errors."""

from __future__ import annotations

import dataclasses
import textwrap
import uuid
from pathlib import Path

import pytest

from sundial.core.db import Queries, QueryFileError, QueryParamsError, UnknownQueryError

SAMPLE = textwrap.dedent(
    """\
    -- Queries of a test store. This header is ignored.

    -- name: claim_due_jobs
    -- Locks due jobs of the owned partitions.
    -- Now is $3, or now() when NULL.
    SELECT job_id
      FROM jobs
     WHERE partition_id = ANY($1)
       AND next_run_at <= coalesce($3::timestamptz, now())
     LIMIT $2
       FOR UPDATE SKIP LOCKED;

    --name:count_jobs
    SELECT count(*) FROM jobs  -- a comment inside the query stays
    -- and so does one on its own line after the SQL starts
    WHERE tenant_id = $1;
    """
)


def test_blocks_are_parsed_with_their_docs() -> None:
    queries = Queries.from_text(SAMPLE, source="sample.sql")
    assert list(queries) == ["claim_due_jobs", "count_jobs"]
    assert len(queries) == 2
    claim = queries.query("claim_due_jobs")
    assert claim.doc == "Locks due jobs of the owned partitions.\nNow is $3, or now() when NULL."
    assert claim.sql.startswith("SELECT job_id\n  FROM jobs")
    assert claim.sql.endswith("FOR UPDATE SKIP LOCKED;")
    assert claim.line == 3
    assert "-- and so does one" in queries["count_jobs"]


def test_lookup_by_key_and_attribute_return_the_sql() -> None:
    queries = Queries.from_text(SAMPLE)
    assert (
        queries.claim_due_jobs == queries["claim_due_jobs"] == queries.query("claim_due_jobs").sql
    )
    assert queries.get("missing") is None
    assert "count_jobs" in queries


def test_unknown_names_raise_with_the_known_ones() -> None:
    queries = Queries.from_text(SAMPLE, source="pkg:queries.sql")
    with pytest.raises(KeyError, match="claim_due_jobs, count_jobs"):
        queries["claim_due_job"]
    with pytest.raises(AttributeError, match=r"no query named 'claim_due_job' in pkg:queries\.sql"):
        queries.claim_due_job  # noqa: B018
    with pytest.raises(UnknownQueryError):
        queries.query("nope")
    assert not hasattr(queries, "nope")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "-- name: a\nSELECT 1;\n-- name: a\nSELECT 2;\n",
            r":3: duplicate query 'a' \(first at line 1\)",
        ),
        ("-- name: a\n-- only a doc\n\n", r":1: query 'a' has no SQL"),
        ("SELECT 1;\n-- name: a\nSELECT 2;\n", r":1: SQL before the first '-- name:' line"),
        ("-- name: two words\nSELECT 1;\n", r"'two words' is not a valid query name"),
        ("-- name: class\nSELECT 1;\n", r"'class' is not a valid query name"),
        ("-- name:\nSELECT 1;\n", r"'' is not a valid query name"),
        ("-- name: keys\nSELECT 1;\n", r"'keys' is reserved"),
        ("-- name: source\nSELECT 1;\n", r"'source' is reserved"),
        ("-- name: a\nSELECT {cols} FROM t;\n", r":1: query 'a' splices \{cols\}, which no"),
        ("-- fragment: cols\na, b\n-- name: a\nSELECT 1;\n", r":1: fragment 'cols' is used"),
        ("-- fragment: a\nx\n-- name: a\nSELECT {a};\n", r":3: duplicate query 'a'"),
    ],
)
def test_malformed_files_are_rejected_with_file_and_line(text: str, message: str) -> None:
    with pytest.raises(QueryFileError, match=message) as caught:
        Queries.from_text(text, source="bad.sql")
    assert str(caught.value).startswith("bad.sql:")


def test_fragments_are_spliced_where_queries_name_them() -> None:
    text = textwrap.dedent(
        """\
        -- name: get_run
        SELECT {run_columns}, '{}'::jsonb FROM job_runs r WHERE r.job_id = $1;

        -- fragment: run_columns
        -- A run's columns.
        r.job_id, r.status

        -- name: cancel_run
        UPDATE job_runs AS r SET status = 'cancelled' RETURNING {run_columns};
        """
    )
    queries = Queries.from_text(text)
    assert list(queries) == ["get_run", "cancel_run"]  # a fragment is not a query
    assert queries.get_run == (
        "SELECT r.job_id, r.status, '{}'::jsonb FROM job_runs r WHERE r.job_id = $1;"
    )
    assert queries.cancel_run.endswith("RETURNING r.job_id, r.status;")


def test_an_empty_file_has_no_queries() -> None:
    assert len(Queries.from_text("-- nothing here yet\n")) == 0


@pytest.fixture
def package_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An importable package of its own (its name is the directory's)."""
    root = tmp_path / f"store_{uuid.uuid4().hex[:8]}"
    root.mkdir()
    (root / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    return root


def test_from_package_reads_the_packaged_file(tmp_path: Path, package_dir: Path) -> None:
    package = package_dir.name
    (tmp_path / package / "queries.sql").write_text(SAMPLE)
    (tmp_path / package / "other.sql").write_text("-- name: ping\nSELECT 1;\n")

    queries = Queries.from_package(package)
    assert queries.source == f"{package}:queries.sql"
    assert set(queries) == {"claim_due_jobs", "count_jobs"}
    assert Queries.from_package(package, "other.sql").ping == "SELECT 1;"
    with pytest.raises(FileNotFoundError):
        Queries.from_package(package, "missing.sql")


def test_a_shared_file_lends_its_fragments_and_holds_nothing_else(
    tmp_path: Path, package_dir: Path
) -> None:
    package = package_dir.name
    (tmp_path / package / "shared.sql").write_text(
        "-- header\n\n-- fragment: set_list\nstatus = c.status\n\n-- fragment: unused\nx = 1\n"
    )
    (tmp_path / package / "queries.sql").write_text(
        "-- name: cancel\nUPDATE t SET {set_list} FROM (SELECT $1 AS status) c;\n"
    )
    (tmp_path / package / "bad.sql").write_text("-- name: q\nSELECT 1;\n")

    queries = Queries.from_package(package, shared=[(package, "shared.sql")])
    # Spliced in; a shared fragment this file does not use is no error.
    assert queries.cancel == "UPDATE t SET status = c.status FROM (SELECT $1 AS status) c;"
    with pytest.raises(QueryFileError, match="splices"):
        Queries.from_package(package)  # without the shared file the name is unknown
    with pytest.raises(QueryFileError, match="fragments only"):
        Queries.from_package(package, shared=[(package, "bad.sql")])


NAMED = textwrap.dedent(
    """\
    -- name: rename
    -- Renames job :job_id (a name in the doc is no parameter).
    UPDATE jobs SET name = :name, note = 'at 10:30 :not_a_param', "odd:col" = 1,
           updated_at = :now::timestamptz, ids = ids[1:n]  -- :nor_this
     WHERE job_id = :job_id AND updated_at < :now;
    """
)


@dataclasses.dataclass
class Rename:
    # Fields in another order than the query reads them: binding goes by name.
    job_id: uuid.UUID
    now: str
    name: str


def test_named_parameters_become_positions_in_order_of_first_use() -> None:
    query = Queries.from_text(NAMED).query("rename")
    assert query.params == ("name", "now", "job_id")
    # Each name is one parameter wherever it is used; literals, quoted identifiers,
    # comments, casts and slices are left as they are.
    assert query.sql == (
        "UPDATE jobs SET name = $1, note = 'at 10:30 :not_a_param', \"odd:col\" = 1,\n"
        "       updated_at = $2::timestamptz, ids = ids[1:n]  -- :nor_this\n"
        " WHERE job_id = $3 AND updated_at < $2;"
    )
    assert Queries.from_text(SAMPLE).query("count_jobs").params == ()


def test_bind_lays_the_parameters_out_by_name() -> None:
    queries = Queries.from_text(NAMED)
    job_id = uuid.uuid4()
    sql, *args = queries.bind("rename", Rename(job_id=job_id, now="t", name="n"))
    assert sql == queries.rename
    assert args == ["n", "t", job_id]
    assert queries.bind("rename", {"now": "t", "job_id": job_id, "name": "n"})[1:] == (
        "n",
        "t",
        job_id,
    )


@dataclasses.dataclass
class Forgotten:  # the query reads :now, which this lacks
    job_id: uuid.UUID
    name: str


@dataclasses.dataclass
class Unread:  # the query never reads :note
    job_id: uuid.UUID
    now: str
    name: str
    note: str


def test_a_parameter_missing_or_unread_fails_the_bind() -> None:
    queries = Queries.from_text(NAMED, source="named.sql")
    with pytest.raises(QueryParamsError, match=r"named.sql:1: query 'rename' reads now, not"):
        queries.bind("rename", Forgotten(job_id=uuid.uuid4(), name="n"))
    with pytest.raises(QueryParamsError, match="never reads note"):
        queries.check_params("rename", Unread)
    with pytest.raises(QueryParamsError, match="never reads note"):
        queries.bind("rename", {"job_id": 1, "now": 2, "name": 3, "note": 4})
    with pytest.raises(QueryParamsError, match="not a dataclass"):
        queries.check_params("rename", dict)
    with pytest.raises(QueryParamsError, match="by position"):
        Queries.from_text(SAMPLE).bind("count_jobs", {"tenant_id": "t"})


def test_a_query_mixing_named_and_positional_parameters_is_rejected() -> None:
    with pytest.raises(QueryFileError, match=r"bad.sql:1: query 'a' mixes named and positional"):
        Queries.from_text("-- name: a\nSELECT :x, $1;\n", source="bad.sql")
