"""``RunLedger``: how executors lease, heartbeat and complete runs (ledger.proto).

The servicer parses requests, asks the store for the locked run states, decides with
:mod:`sundial.run`'s state machine and has the store write the result in the same
transaction; signing and the dead-letter fast path are modules of their own.
"""

from sundial.scheduler.ledger._servicer import RunLedgerServicer
from sundial.scheduler.ledger._signing import signature

__all__ = ["RunLedgerServicer", "signature"]
