"""The executor's ledger address: one address, or several IP ones balanced round robin."""

from __future__ import annotations

import pytest

from sundial.core.config import ConfigError
from sundial.executor.config import ExecutorConfig

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
