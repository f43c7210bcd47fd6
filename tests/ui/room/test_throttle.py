"""Wrong room codes are slowed down per client: free tries, then doubling waits, per session and per address."""
from ui.room.throttle import Throttle, client_keys


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_free_tries_then_the_wait_doubles_up_to_the_cap():
    clock = Clock()
    t = Throttle(base_s=2, cap_s=10, free={"session": 3, "ip": 10}, clock=clock)
    keys = client_keys("s1", None)
    assert [t.failed(keys) for _ in range(3)] == [0, 0, 0]  # typos are free
    assert t.failed(keys) == 2 and t.wait_left(keys) == 2
    clock.now += 2
    assert t.wait_left(keys) == 0
    assert t.failed(keys) == 4
    clock.now += 4
    assert t.failed(keys) == 8
    clock.now += 8
    assert t.failed(keys) == 10  # capped


def test_a_right_code_clears_the_session_but_not_the_address():
    clock = Clock()
    t = Throttle(free={"session": 1, "ip": 2}, clock=clock)
    keys = client_keys("s1", "10.0.0.7")
    assert keys == ["session:s1", "ip:10.0.0.7"]
    t.failed(keys)
    t.succeeded(keys)
    assert t.failures("session:s1") == 0 and t.failures("ip:10.0.0.7") == 1


def test_a_fresh_session_from_the_same_address_still_meets_the_back_off():
    clock = Clock()
    t = Throttle(base_s=2, free={"session": 3, "ip": 4}, clock=clock)
    for i in range(5):  # a script opening a new session for every guess
        t.failed(client_keys(f"s{i}", "10.0.0.9"))
    assert t.wait_left(client_keys("s-new", "10.0.0.9")) == 2
    assert t.wait_left(client_keys("s-new", "10.0.0.10")) == 0  # another student's device is not slowed


def test_a_quiet_spell_forgets_old_failures():
    clock = Clock()
    t = Throttle(forget_s=60, free={"session": 1, "ip": 1}, clock=clock)
    keys = client_keys("s1", None)
    t.failed(keys), t.failed(keys)
    assert t.wait_left(keys) > 0
    clock.now += 61
    assert t.wait_left(keys) == 0 and t.failures("session:s1") == 0
