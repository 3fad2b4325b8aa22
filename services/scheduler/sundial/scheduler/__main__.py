"""``sundial-scheduler``: run the scheduler service."""

from sundial.core.service import main as run_service
from sundial.scheduler.app import build
from sundial.scheduler.config import SchedulerConfig


def main() -> None:
    run_service("scheduler", SchedulerConfig.from_env, build)


if __name__ == "__main__":
    main()
