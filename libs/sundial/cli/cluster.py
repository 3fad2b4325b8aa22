"""``sundial admin cluster status``: the scheduler cluster's members, the partitions each
owns, and the dispatch lag (AdminService.ClusterStatus; an admin token is needed)."""

from __future__ import annotations

import typer

from sundial.cli._client import AdminTokenOption, Connection, admin_client, connected, when
from sundial.cli._output import Column, Output, OutputOption, emit, print_fields, print_table
from sundial.v1 import admin_pb2 as pb

app = typer.Typer(name="cluster", help="The scheduler cluster.", no_args_is_help=True)


@app.command("status")
@connected
def cluster_status(
    *,
    conn: Connection,
    token: AdminTokenOption = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """Scheduler members, how many partitions each owns, and the dispatch lag."""
    with admin_client(conn, token) as (stub, md):
        response = stub.ClusterStatus(pb.ClusterStatusRequest(), metadata=md)

    def table(wide: bool) -> None:
        unowned = sum(1 for p in response.partitions if not p.node_id)
        print_fields(
            f"cluster {response.cluster}",
            [
                ("observed at", response.observed_at.ToJsonString()),
                ("dispatch lag", f"{response.dispatch_lag.ToTimedelta().total_seconds():.3f}s"),
                (
                    "oldest due",
                    when(response.oldest_due_time, set_=response.HasField("oldest_due_time")),
                ),
                ("partitions", f"{response.partition_count} ({unowned} unowned)"),
            ],
        )
        print_table(
            (
                Column("node id"),
                Column("address", 1),
                Column("partitions"),
                Column("version", 2),
                Column("since", 3),
                Column("lease id", 4, wide=True),
            ),
            [
                (
                    m.node_id,
                    m.address,
                    str(m.partitions_owned),
                    m.version,
                    when(m.since, relative=False),
                    str(m.lease_id),
                )
                for m in response.members
            ],
            wide=wide,
            title="members",
        )

    emit(response, output, table=table, names=lambda: [m.node_id for m in response.members])
