"""Runtime shared by Sundial's services.

Each concern has its own module, imported by its full name so a service pulls in only
what it uses (``sundial.core.db`` needs asyncpg, ``sundial.core.grpc`` needs grpcio):

- :mod:`sundial.core.config`: frozen-dataclass configuration loaded from ``SUNDIAL_*``.
- :mod:`sundial.core.errors`: the error hierarchy, each class with its gRPC status code.
- :mod:`sundial.core.logging`: one-JSON-object-per-line logs with request/run ids.
- :mod:`sundial.core.grpc`: the server builder (health, reflection) and error interceptor.
- :mod:`sundial.core.lifecycle`: runs long-lived components in one task group.
- :mod:`sundial.core.clock`: the injectable source of "now".
- :mod:`sundial.core.db`: the connection pool, named SQL queries, SQLSTATE translation,
  migrations and run-history partitions.
"""
