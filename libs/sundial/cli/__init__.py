"""The ``sundial`` command: the local stack and, over gRPC, jobs and runs."""
