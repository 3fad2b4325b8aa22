"""``sundial-executor``: run the executor service."""

from sundial.core.service import main as run_service
from sundial.executor.app import build
from sundial.executor.config import ExecutorConfig


def main() -> None:
    run_service("executor", ExecutorConfig.from_env, build)


if __name__ == "__main__":
    main()
