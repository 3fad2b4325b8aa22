"""Benchmark sundial.schedule: next-fire computations per second, cold and for a herd.

Run: ``python bench/bench_schedule.py [--herd 100000] [--cold 5000] [--json]``.

Reported, all in the same run so they share the machine's state:

* ``croniter_reference``: bare ``croniter.get_next`` on a zone-aware datetime (croniter's
  own DST handling), one iterator reused: the machine's reference for one computation.
* ``cold``: distinct expressions and zones, every cache cleared first; each job is
  compiled (parse, expand, build its clock) and asked for one next fire time.
* ``cold_next_fire``: next-fire computations on already compiled schedules at distinct
  instants (no cache hits): the DST-aware computation alone.
* ``herd``: N jobs sharing ``0 * * * *`` and one zone, each compiled and asked for the
  next fire time after the same instant (caches cleared first): the design's "100k jobs
  cost about one computation".
* ``herd_precompiled``: the same herd's next-fire calls alone (the scheduler's hot path).
* ``hashed_herd``: jobs sharing ``H H * * *``: no sharing by design (each job its own
  minute), so this is close to ``cold``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

try:
    import sundial.schedule  # noqa: F401  (installed: nothing to do)
except ImportError:  # not installed: run from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "libs"))

from croniter import croniter

from sundial.schedule import CronSpec, Schedule, cache_info, clear_caches, compile_schedule

ZONES = [
    "UTC",
    "America/New_York",
    "Europe/Berlin",
    "Asia/Kolkata",
    "Australia/Lord_Howe",
    "America/Santiago",
    "Asia/Tokyo",
    "Europe/London",
]
AFTER = datetime(2026, 3, 7, 12, 0, tzinfo=UTC)


def _rate(count: int, fn: Callable[[], None]) -> float:
    started = time.perf_counter()
    fn()
    return count / (time.perf_counter() - started)


def bench_croniter_reference(n: int) -> float:
    """Bare croniter get_next, zone-aware, one iterator: the machine's reference."""
    zone = compile_schedule(Schedule(CronSpec("0 * * * *"), time_zone=ZONES[1]), job_id="ref").zone
    it = croniter("*/15 * * * *", AFTER.astimezone(zone), ret_type=datetime)

    def run() -> None:
        for _ in range(n):
            it.get_next(datetime)

    return _rate(n, run)


def _distinct_expressions(n: int) -> list[tuple[str, str]]:
    pairs = []
    for i in range(n):
        minute, hour = i % 60, (i // 60) % 24
        shape = (i // 1440) % 4
        expr = [
            f"{minute} {hour} * * *",
            f"{minute} {hour} * * 1-5",
            f"{minute} */{1 + hour % 6} * * *",
            f"{minute} {hour} 1,15 * *",
        ][shape]
        pairs.append((expr, ZONES[i % len(ZONES)]))
    return pairs


def bench_cold(n: int) -> float:
    """Compile + one next fire per job, distinct expressions and zones, caches cleared."""
    pairs = _distinct_expressions(n)
    clear_caches()

    def run() -> None:
        for i, (expr, zone) in enumerate(pairs):
            compiled = compile_schedule(Schedule(CronSpec(expr), time_zone=zone), job_id=f"j{i}")
            compiled.next_fire(AFTER)

    return _rate(n, run)


def bench_cold_next_fire(n: int) -> float:
    """Next fire on compiled schedules at distinct instants (every call a cache miss)."""
    compiled = [
        compile_schedule(Schedule(CronSpec("*/15 * * * *"), time_zone=zone), job_id="c")
        for zone in ZONES
    ]
    clear_caches()
    instants = [AFTER + timedelta(seconds=37 * i) for i in range(n)]

    def run() -> None:
        for i, after in enumerate(instants):
            compiled[i % len(compiled)].next_fire(after)

    return _rate(n, run)


def bench_herd(n: int, expression: str = "0 * * * *") -> tuple[float, float, int]:
    """N jobs sharing an expression and zone: compile + next fire, then next fire alone."""
    clear_caches()
    jobs = []

    def compile_and_fire() -> None:
        for i in range(n):
            compiled = compile_schedule(
                Schedule(CronSpec(expression), time_zone="Europe/Berlin"), job_id=f"job-{i}"
            )
            compiled.next_fire(AFTER)
            jobs.append(compiled)

    with_compile = _rate(n, compile_and_fire)
    computations = cache_info().next_fire.misses

    def fire_only() -> None:
        for compiled in jobs:
            compiled.next_fire(AFTER)

    return with_compile, _rate(n, fire_only), computations


def results(herd: int = 100_000, cold: int = 5_000) -> dict[str, object]:
    """Run every benchmark and return the figures (computations per second)."""
    reference = bench_croniter_reference(cold)
    cold_rate = bench_cold(cold)
    cold_next = bench_cold_next_fire(cold)
    herd_rate, herd_fire_rate, herd_computations = bench_herd(herd)
    hashed = min(herd, 20_000)
    hashed_rate, _, hashed_computations = bench_herd(hashed, "H H * * *")
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "croniter_reference_per_s": round(reference),
        "cold_compile_and_next_fire_per_s": round(cold_rate),
        "cold_next_fire_per_s": round(cold_next),
        "herd_jobs": herd,
        "herd_compile_and_next_fire_per_s": round(herd_rate),
        "herd_precompiled_next_fire_per_s": round(herd_fire_rate),
        "herd_actual_computations": herd_computations,
        "hashed_herd_jobs": hashed,
        "hashed_herd_compile_and_next_fire_per_s": round(hashed_rate),
        "hashed_herd_actual_computations": hashed_computations,
    }


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run, print a table (or JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--herd", type=int, default=100_000, help="jobs in the herd")
    parser.add_argument("--cold", type=int, default=5_000, help="distinct cold computations")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    figures = results(herd=args.herd, cold=args.cold)
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    width = max(len(k) for k in figures)
    for key, value in figures.items():
        shown = f"{value:,}" if isinstance(value, int) else str(value)
        print(f"{key:<{width}}  {shown:>12}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
