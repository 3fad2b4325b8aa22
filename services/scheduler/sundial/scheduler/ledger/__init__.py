"""``RunLedgerService``: how executors lease, heartbeat and complete runs (ledger.proto).

The servicer parses requests, asks the store for the locked run states, decides with
:mod:`sundial.run`'s state machine and has the store write the result in the same
transaction; signing and the dead-letter fast path are modules of their own.
:class:`LedgerAuthInterceptor` admits only executor tokens.
"""

from sundial.scheduler.ledger._auth import LedgerAuthInterceptor, current_token_id
from sundial.scheduler.ledger._servicer import (
    MAX_BATCH,
    MAX_HELD,
    RunLedgerServiceServicer,
    completion_in,
    completion_result,
    executor_id_in,
    lease_id_in,
    lease_ttl_in,
    rejection_out,
)
from sundial.scheduler.ledger._signing import call_headers, run_signature, signature

# The request parsing and answer encoding are public so the test double of RunLedgerService
# (tests/helpers/ledger_double.py) refuses and answers exactly as this servicer does.
__all__ = [
    "MAX_BATCH",
    "MAX_HELD",
    "LedgerAuthInterceptor",
    "RunLedgerServiceServicer",
    "call_headers",
    "completion_in",
    "completion_result",
    "current_token_id",
    "executor_id_in",
    "lease_id_in",
    "lease_ttl_in",
    "rejection_out",
    "run_signature",
    "signature",
]
