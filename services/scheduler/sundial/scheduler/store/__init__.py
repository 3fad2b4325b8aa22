"""The scheduler's only door to PostgreSQL: every SQL statement it runs is here.

Store methods lock rows and return typed values (:mod:`sundial.scheduler.model`,
:mod:`sundial.run`), and write what their callers decided; they take no decision
callbacks, and no asyncpg row leaves this package.
"""

from sundial.scheduler.store._queries import queries
from sundial.scheduler.store._rows import MAX_RUNS_PER_MESSAGE
from sundial.scheduler.store._store import TRANSIENT_ERRORS, HeldLease, HeldRun, SchedulerStore
from sundial.scheduler.store._tx import DocumentCache, Transaction

__all__ = [
    "MAX_RUNS_PER_MESSAGE",
    "TRANSIENT_ERRORS",
    "DocumentCache",
    "HeldLease",
    "HeldRun",
    "SchedulerStore",
    "Transaction",
    "queries",
]
