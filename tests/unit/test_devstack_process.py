"""The local stack's child processes (``sundial.devstack._process``): a Ctrl-C while one
starts leaves it ours to stop."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sundial.devstack._process import ManagedProcess


@pytest.fixture
def ctrl_c_raises() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt, as in ``sundial dev`` (a test worker may have
    another handler)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_a_ctrl_c_while_a_child_starts_is_raised_once_the_child_is_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ctrl_c_raises: None
) -> None:
    # `sundial dev` interrupted while starting left a server running after it exited:
    # the KeyboardInterrupt came inside Popen, after the fork, before the stack held the
    # child. Here the Ctrl-C comes just as Popen is called.
    real_popen = subprocess.Popen

    def interrupted(*args, **kwargs):  # type: ignore[no-untyped-def]
        os.kill(os.getpid(), signal.SIGINT)
        return real_popen(*args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", interrupted)
    child = ManagedProcess(
        "sleeper", [sys.executable, "-c", "import time; time.sleep(60)"], log_path=tmp_path / "log"
    )
    with pytest.raises(KeyboardInterrupt):
        child.start()
    try:
        assert child.alive(), "the child started, but nothing holds it to stop it"
    finally:
        child.stop(timeout_s=5)
    assert not child.alive()
