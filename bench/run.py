"""Run every benchmark under bench/ (``bench_*.py``) in turn and save what each printed.

Each benchmark is a standalone script that starts what it needs (the local stack for
the service benchmarks), prints its figures beside the machine's own limit measured in
the same run, and exits. Results go to ``bench/results/<name>.txt``.

Usage: ``python bench/run.py [name ...]`` (names without the ``bench_`` prefix).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    wanted = set(argv)
    failed = 0
    for script in sorted(HERE.glob("bench_*.py")):
        name = script.stem.removeprefix("bench_")
        if wanted and name not in wanted:
            continue
        print(f"== {name}", flush=True)
        result = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, check=False
        )
        print(result.stdout, end="")
        if result.returncode != 0:
            failed += 1
            print(result.stderr, end="", file=sys.stderr)
            continue
        (HERE / "results" / f"{name}.txt").write_text(result.stdout)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
