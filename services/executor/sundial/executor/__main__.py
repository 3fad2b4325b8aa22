"""``sundial-executor [--processes N]``: run the executor service.

With one process (the default) this process is the executor; with more, it supervises
that many executor workers (:mod:`sundial.executor.supervisor`).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
from collections.abc import Sequence

from sundial.core.config import ConfigError
from sundial.core.logging import configure_logging
from sundial.core.service import event_loop_factory
from sundial.core.service import main as run_service
from sundial.executor.app import build
from sundial.executor.config import ExecutorConfig
from sundial.executor.supervisor import Supervisor, die_with_supervisor, worker_count


def _processes(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError("expected a whole number >= 0 (0: one per core)")
    return int(text)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="sundial-executor", description=__doc__)
    parser.add_argument(
        "--processes",
        type=_processes,
        metavar="N",
        help="worker processes, 0 for one per core (default: SUNDIAL_EXECUTOR_PROCESSES, 1)",
    )
    args = parser.parse_args(argv)
    die_with_supervisor()  # a worker: never outlive the supervisor
    try:
        config = ExecutorConfig.from_env()
        if args.processes is not None:
            config = dataclasses.replace(config, executor_processes=args.processes)
    except ConfigError as exc:
        print(f"sundial-executor: configuration error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    count = worker_count(config)
    if count == 1:
        run_service("executor", lambda: config, build)
        return
    configure_logging(config)
    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        raise SystemExit(runner.run(Supervisor(config, count).run()))


if __name__ == "__main__":
    main()
