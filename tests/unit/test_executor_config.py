"""The executor's configuration: the ledger address (one address, or several IP ones
balanced round robin) and the number of worker processes."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

from sundial.core.config import ConfigError
from sundial.executor.__main__ import main as executor_main
from sundial.executor.config import ExecutorConfig
from sundial.executor.supervisor import worker_count

BASE = {"nats_url": "nats://127.0.0.1:4222", "ledger_token": "executor-token"}


@pytest.mark.parametrize(
    ("address", "target"),
    [
        ("ledger:50051", "ledger:50051"),
        ("sundial-ledger.ns.svc:50051", "sundial-ledger.ns.svc:50051"),
        ("10.0.0.1:50051,10.0.0.2:50051", "ipv4:10.0.0.1:50051,10.0.0.2:50051"),
        (" 10.0.0.1:1 , 10.0.0.2:2 ", "ipv4:10.0.0.1:1,10.0.0.2:2"),
        ("[fd00::1]:1,[fd00::2]:2", "ipv6:[fd00::1]:1,[fd00::2]:2"),
    ],
)
def test_the_ledger_target(address: str, target: str) -> None:
    assert ExecutorConfig(ledger_address=address, **BASE).ledger_target == target


@pytest.mark.parametrize(
    "address", ["", "ledger", "a:1,b:2", "10.0.0.1:1,[::1]:2", "10.0.0.1:x", ","]
)
def test_a_bad_ledger_address_names_the_variable(address: str) -> None:
    with pytest.raises(ConfigError) as caught:
        ExecutorConfig(ledger_address=address, **BASE)
    assert caught.value.name == "ledger_address"


def test_executor_processes_zero_means_one_per_usable_core() -> None:
    config = ExecutorConfig(ledger_address="ledger:1", executor_processes=0, **BASE)
    assert worker_count(config) == len(os.sched_getaffinity(0))
    assert worker_count(replace(config, executor_processes=3)) == 3


def test_a_negative_process_count_is_refused_by_variable_and_by_flag(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"SUNDIAL_NATS_URL": BASE["nats_url"], "SUNDIAL_LEDGER_TOKEN": "t"}
    with pytest.raises(ConfigError) as caught:
        ExecutorConfig.from_env(
            environ={**env, "SUNDIAL_LEDGER_ADDRESS": "l:1", "SUNDIAL_EXECUTOR_PROCESSES": "-1"}
        )
    assert caught.value.name == "SUNDIAL_EXECUTOR_PROCESSES"
    for name, value in {**env, "SUNDIAL_LEDGER_ADDRESS": "l:1"}.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as exited:
        executor_main(["--processes", "-1"])
    assert exited.value.code == 2
    assert "--processes" in capsys.readouterr().err
