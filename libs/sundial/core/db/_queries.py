"""Named SQL queries loaded from ``.sql`` files (procrastinate's ``queries.sql`` style).

A file holds blocks, each starting with a name line and optional comment lines that
document it::

    -- name: claim_due_jobs
    -- Locks up to $2 due jobs of the owned partitions $1; now is $3 or now().
    SELECT job_id, next_run_at
      FROM jobs
     WHERE partition_id = ANY($1) AND NOT paused
       AND next_run_at <= coalesce($3::timestamptz, now())
     ORDER BY next_run_at
     LIMIT $2
       FOR UPDATE SKIP LOCKED;

Everything up to the next name line is the query. Comments and blank lines before the
first block are a file header. A ``-- fragment: NAME`` block is SQL written once and
spliced where a query says ``{NAME}`` (a resource's select list, written once for every
query that reads the resource)::

    -- fragment: run_columns
    r.job_id, r.scheduled_at, r.status

    -- name: get_run
    SELECT {run_columns} FROM job_runs r WHERE r.job_id = $1;

A ``{NAME}`` that names no fragment is an error when the file loads, as is a fragment no
query uses. Fragments shared by several services' files live in a file of fragments only
(``sundial/run/cancel.sql``: one transition's SET list), named with ``shared=`` at load.
A query takes its parameters by position (``$1``, as asyncpg does) or by name
(``:tenant_id``), never both. A named query is rewritten to positions when the file
loads (each name its own ``$n``, in order of first use; a name used twice is one
parameter), skipping string literals, quoted identifiers, comments and ``::`` casts;
:meth:`Queries.bind` then lays a typed parameters object out in that order, and refuses
one whose fields are not exactly the query's names, so a parameter the query forgot or
the object lacks fails the first call (and :meth:`Queries.check_params` in a unit
test), and no two can be swapped by position::

    -- name: rename_job
    UPDATE jobs SET name = :name, updated_at = :now
     WHERE job_id = :job_id AND tenant_id = :tenant_id;

    await conn.execute(*queries.bind("rename_job", RenameJob(...)))

A store loads its file once at import::

    queries = Queries.from_package("sundial.scheduler")
    rows = await conn.fetch(queries.claim_due_jobs, owned, batch, now)
"""

from __future__ import annotations

import dataclasses
import importlib.resources
import keyword
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Queries", "Query", "QueryFileError", "QueryParamsError", "UnknownQueryError"]

_NAME_LINE = re.compile(r"^--\s*(name|fragment)\s*:(.*)$")
_SPLICE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# What a parameter may not hide in (a literal, a quoted identifier, a comment), then a
# named parameter (a ':' that is no part of a '::' cast nor follows a word: `a[1:n]`)
# and a positional one.
_PARAMETER = re.compile(
    r"""('(?:[^']|'')*'|"(?:[^"]|"")*"|--[^\n]*)"""
    r"|(?<![:\w]):([a-z_][a-z0-9_]*)"
    r"|(\$\d+)"
)


class QueryFileError(ValueError):
    """A query file is malformed; the message gives the file and line."""


class QueryParamsError(TypeError):
    """A parameters object does not hold exactly a named query's parameters."""


class UnknownQueryError(KeyError, AttributeError):
    """No query has that name (a ``KeyError`` for ``q[...]``, ``AttributeError`` for ``q.x``)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True)
class Query:
    """One named block of a query file."""

    name: str
    sql: str
    doc: str
    line: int
    """1-based line of the ``-- name:`` line, for error messages."""
    params: tuple[str, ...] = ()
    """A named query's parameters, ``$1`` first (empty: it takes them by position)."""


class Queries(Mapping[str, str]):
    """Read-only mapping of query name to SQL text, also readable as attributes.

    ``queries["claim_due_jobs"]`` and ``queries.claim_due_jobs`` both return the SQL; an
    unknown name raises :class:`UnknownQueryError` listing the known ones, so a typo
    fails at the first call with a useful message.
    """

    def __init__(self, queries: Mapping[str, Query], *, source: str) -> None:
        self._queries = dict(queries)
        self.source = source
        """Where the queries came from (``package:resource``), for error messages."""
        self._checked: set[tuple[str, type]] = set()

    @classmethod
    def from_package(
        cls,
        package: str,
        resource: str = "queries.sql",
        *,
        shared: Sequence[tuple[str, str]] = (),
    ) -> Queries:
        """Load ``resource`` from the package ``package`` (works from wheels and zips),
        with the fragments of the files ``shared`` ((package, resource) pairs: files of
        fragments only, which this file may splice but need not use all of).

        Raises:
            QueryFileError: A file is malformed (duplicate name, empty query...).
            FileNotFoundError: A package has no such file.
        """
        extra: dict[str, Query] = {}
        for owner, name in shared:
            source = f"{owner}:{name}"
            if _parse(_read(owner, name), source, fragments_only=True, into=extra):
                raise QueryFileError(f"{source}: a shared file holds fragments only")
        text = _read(package, resource)
        return cls(
            _parse(text, f"{package}:{resource}", shared=extra), source=f"{package}:{resource}"
        )

    @classmethod
    def from_text(cls, text: str, *, source: str = "<string>") -> Queries:
        """Parse query-file text; see the module docstring for the format.

        Raises:
            QueryFileError: The text is malformed.
        """
        return cls(_parse(text, source), source=source)

    def __getitem__(self, name: str) -> str:
        try:
            return self._queries[name].sql
        except KeyError:
            raise UnknownQueryError(self._unknown(name)) from None

    def __getattr__(self, name: str) -> str:
        # Only called when normal lookup fails, i.e. for query names.
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self._queries[name].sql
        except KeyError:
            raise UnknownQueryError(self._unknown(name)) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._queries)

    def __len__(self) -> int:
        return len(self._queries)

    def __repr__(self) -> str:
        return f"Queries({self.source!r}, {sorted(self._queries)})"

    def query(self, name: str) -> Query:
        """The full :class:`Query` (SQL, doc, line) named ``name``."""
        try:
            return self._queries[name]
        except KeyError:
            raise UnknownQueryError(self._unknown(name)) from None

    def bind(self, name: str, values: Any) -> tuple[Any, ...]:
        """The named query ``name``'s SQL followed by its arguments taken by name from
        ``values`` (a dataclass instance, or a mapping), ready for asyncpg:
        ``await conn.fetch(*queries.bind("insert_jobs", params))``.

        Raises:
            QueryParamsError: ``name`` takes no named parameters, or ``values`` does not
                hold exactly its parameters (one missing, or one the query never reads).
        """
        query = self.query(name)
        if isinstance(values, Mapping):
            self._check(query, set(values))
            return (query.sql, *(values[param] for param in query.params))
        kind = type(values)
        if (name, kind) not in self._checked:
            self.check_params(name, kind)
            self._checked.add((name, kind))
        return (query.sql, *(getattr(values, param) for param in query.params))

    def check_params(self, name: str, kind: type) -> None:
        """Check that the dataclass ``kind`` has exactly the named query ``name``'s
        parameters as its fields (a unit test calls this for every named query).

        Raises:
            QueryParamsError: It does not, or ``kind`` is not a dataclass.
        """
        if not dataclasses.is_dataclass(kind):
            raise QueryParamsError(f"{kind.__name__} is not a dataclass")
        self._check(self.query(name), {field.name for field in dataclasses.fields(kind)})

    def _check(self, query: Query, given: set[str]) -> None:
        where = f"{self.source}:{query.line}: query {query.name!r}"
        if not query.params:
            raise QueryParamsError(f"{where} takes its parameters by position")
        missing = [param for param in query.params if param not in given]
        if missing:
            raise QueryParamsError(f"{where} reads {', '.join(missing)}, not given")
        unused = sorted(given - set(query.params))
        if unused:
            raise QueryParamsError(f"{where} never reads {', '.join(unused)}")

    def _unknown(self, name: str) -> str:
        known = ", ".join(sorted(self._queries)) or "none"
        return f"no query named {name!r} in {self.source} (known: {known})"


def _read(package: str, resource: str) -> str:
    return importlib.resources.files(package).joinpath(resource).read_text(encoding="utf-8")


def _parse(
    text: str,
    source: str,
    *,
    shared: Mapping[str, Query] | None = None,
    fragments_only: bool = False,
    into: dict[str, Query] | None = None,
) -> dict[str, Query]:
    """The queries of ``text``, their splices done (``shared``: fragments of other
    files). With ``fragments_only`` (a shared file): the queries found, unspliced, and
    the fragments put ``into`` the given mapping."""
    queries: dict[str, Query] = {}
    fragments: dict[str, Query] = into if into is not None else {}
    # Names that would be shadowed by Queries' own attributes (`keys`, `get`, `source`).
    reserved = {n for n in dir(Queries) if not n.startswith("_")} | {"source"}
    current: tuple[str, int, bool] | None = None
    doc: list[str] = []
    body: list[str] = []
    in_doc = False

    def finish() -> None:
        if current is None:
            return
        name, line, fragment = current
        sql = "\n".join(body).strip()
        if not sql:
            raise QueryFileError(f"{source}:{line}: query {name!r} has no SQL")
        (fragments if fragment else queries)[name] = Query(
            name=name, sql=sql, doc="\n".join(doc).strip(), line=line
        )

    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip()
        match = _NAME_LINE.match(line.strip())
        if match:
            finish()
            fragment = match.group(1) == "fragment"
            name = match.group(2).strip()
            where = f"{source}:{number}"
            if not _IDENTIFIER.fullmatch(name) or keyword.iskeyword(name):
                raise QueryFileError(f"{where}: {name!r} is not a valid query name")
            if name in reserved:
                raise QueryFileError(f"{where}: query name {name!r} is reserved by Queries")
            if name in queries or name in fragments:
                first = (queries.get(name) or fragments[name]).line
                raise QueryFileError(f"{where}: duplicate query {name!r} (first at line {first})")
            current, doc, body, in_doc = (name, number, fragment), [], [], True
            continue
        if current is None:
            if line.strip() and not line.lstrip().startswith("--"):
                raise QueryFileError(f"{source}:{number}: SQL before the first '-- name:' line")
            continue
        if in_doc and line.lstrip().startswith("--"):
            doc.append(line.lstrip()[2:].strip())
            continue
        in_doc = False
        body.append(line)
    finish()
    if fragments_only:
        return queries
    return _splice(queries, fragments, source, shared or {})


def _splice(
    queries: dict[str, Query],
    fragments: Mapping[str, Query],
    source: str,
    shared: Mapping[str, Query],
) -> dict[str, Query]:
    """Each query with the fragments it names spliced in (fragments hold no splices);
    the file's own fragments must all be used, ``shared`` ones need not."""
    used: set[str] = set()
    spliced: dict[str, Query] = {}
    for name, query in queries.items():

        def fragment(match: re.Match[str], query: Query = query) -> str:
            found = fragments.get(match.group(1)) or shared.get(match.group(1))
            if found is None:
                raise QueryFileError(
                    f"{source}:{query.line}: query {query.name!r} splices "
                    f"{{{match.group(1)}}}, which no '-- fragment:' block defines"
                )
            used.add(found.name)
            return found.sql

        spliced[name] = _positional(
            dataclasses.replace(query, sql=_SPLICE.sub(fragment, query.sql)), source
        )
    unused = sorted(set(fragments) - used)
    if unused:
        where = fragments[unused[0]].line
        raise QueryFileError(f"{source}:{where}: fragment {unused[0]!r} is used by no query")
    return spliced


def _positional(query: Query, source: str) -> Query:
    """``query`` with its named parameters rewritten to ``$n`` (and listed in
    :attr:`Query.params`); a query with none is returned as it is."""
    params: dict[str, int] = {}
    positional = False

    def rewrite(match: re.Match[str]) -> str:
        nonlocal positional
        if match.group(2) is None:
            positional = positional or match.group(3) is not None
            return match.group(0)
        number = params.setdefault(match.group(2), len(params) + 1)
        return f"${number}"

    sql = _PARAMETER.sub(rewrite, query.sql)
    if not params:
        return query
    if positional:
        raise QueryFileError(
            f"{source}:{query.line}: query {query.name!r} mixes named and positional parameters"
        )
    return dataclasses.replace(query, sql=sql, params=tuple(params))
