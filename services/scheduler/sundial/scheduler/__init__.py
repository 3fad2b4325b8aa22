"""The scheduler service: partition ownership, dispatch, sweeps and the ``RunLedgerService``."""
