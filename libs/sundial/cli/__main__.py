"""``sundial``: entry point of the command-line tool."""

from sundial.cli.app import app


def main() -> None:
    app()


if __name__ == "__main__":
    main()
