"""``sundial-api``: run the API service."""

from sundial.api.app import build
from sundial.api.config import ApiConfig
from sundial.core.service import main as run_service


def main() -> None:
    run_service("api", ApiConfig.from_env, build)


if __name__ == "__main__":
    main()
