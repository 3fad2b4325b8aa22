"""The local stack: real PostgreSQL, NATS JetStream and etcd on free loopback ports.

Tests, ``sundial dev`` and the benchmarks all start servers through this package::

    with Stack() as stack:
        print(stack.database_url, stack.nats_url, stack.etcd_endpoints)

Setting ``SUNDIAL_DATABASE_URL``, ``SUNDIAL_NATS_URL`` or ``SUNDIAL_ETCD_ENDPOINTS``
uses existing servers instead of starting them.
"""

from sundial.devstack._demo_target import (
    DemoTarget,
    HttpRequest,
    HttpResponse,
    HttpTargetServer,
    start_demo_target,
)
from sundial.devstack._etcd import EtcdServer
from sundial.devstack._nats import NatsServer, inbox_prefix
from sundial.devstack._process import ServerTls, StackError, free_port
from sundial.devstack._services import SERVICE_NAMES, ServiceProcess, Services, health_status
from sundial.devstack._stack import Stack, runtime_dir

__all__ = [
    "SERVICE_NAMES",
    "DemoTarget",
    "EtcdServer",
    "HttpRequest",
    "HttpResponse",
    "HttpTargetServer",
    "NatsServer",
    "ServerTls",
    "ServiceProcess",
    "Services",
    "Stack",
    "StackError",
    "free_port",
    "health_status",
    "inbox_prefix",
    "runtime_dir",
    "start_demo_target",
]
