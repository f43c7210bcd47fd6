"""Fixtures shared by the fast paths' tests."""
import pytest

import engine


@pytest.fixture(scope="module")
def plain_llama():
    return engine.load_model("tiny-llama", device="cpu", kernels="plain")


class QuietMeter:
    """A CPU-wait meter that sees no other program: races here are judged on their times alone (the tests of a
    disturbed race give their own waits)."""
    available = True

    def mark(self):
        pass

    def lap(self):
        from engine.host.cpu_wait import Wait

        return Wait(0.0, 0.0)


@pytest.fixture(autouse=True)
def quiet_machine(monkeypatch):
    from engine.techniques import kernel_choice

    monkeypatch.setattr(kernel_choice, "WaitMeter", QuietMeter)
