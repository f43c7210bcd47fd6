"""tests/browser/appdriver.py's server start and stop (shared by benchmarks/bench_traffic.py and tests/serving_helpers.py)."""
import sys
import threading

import pytest

from tests.serving_helpers import appdriver, free_port

HEALTH = """
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def test_a_server_is_ready_once_health_answers_and_stops_with_its_group(tmp_path):
    port = free_port()
    proc = appdriver.start_server([sys.executable, "-c", HEALTH, str(port)], port, tmp_path / "log", timeout=60)
    assert appdriver.healthy(port) and proc.poll() is None
    appdriver.stop_server(proc)
    assert proc.poll() is not None and not appdriver.healthy(port)


def test_a_server_that_exits_during_start_up_says_its_exit_code(tmp_path):
    port = free_port()
    with pytest.raises(appdriver.ServerDidNotStart, match=r"exited during start-up \(code 3\)") as failed:
        appdriver.start_server([sys.executable, "-c", "print('no'); raise SystemExit(3)"], port, tmp_path / "log", timeout=60)
    assert failed.value.code == 3 and (tmp_path / "log").read_text().strip() == "no"


@pytest.mark.parametrize("worker, index", [("", 0), ("gw0", 1), ("gw1", 2)])
def test_each_test_process_takes_ports_from_a_range_of_its_own(monkeypatch, worker, index):
    """Below the kernel's ephemeral range (where another process's bind(0) could be handed the same port before a
    slow server binds it), one range per xdist worker, no port handed out twice, none already in use."""
    import socket

    monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
    monkeypatch.setattr(appdriver, "_given", set())
    start = 20_000 + index * 2_400  # below 32,768, where the kernel's bind(0) draws
    ports = [free_port() for _ in range(20)]
    assert len(set(ports)) == 20 and all(start <= p < start + 2_400 for p in ports)
    # a short range to use up, with few sockets to hold
    monkeypatch.setattr(appdriver, "PORT_BASE", 30_000)
    monkeypatch.setattr(appdriver, "PORT_SPAN", 40)
    start = 30_000 + index * 40
    ports = [free_port() for _ in range(3)]
    assert all(start <= p < start + 40 for p in ports)
    held = []  # every other free port of the range held but one: that one is the answer, then there is none
    try:
        for port in range(start, start + appdriver.PORT_SPAN):
            if port in ports:  # handed out already: never again, held or not
                continue
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", port))
            except OSError:  # in use by another program
                s.close()
                continue
            held.append(s)
        last = held.pop()
        left = last.getsockname()[1]
        last.close()
        assert free_port() == left
        with pytest.raises(RuntimeError, match="no free port left"):
            free_port()
    finally:
        for s in held:
            s.close()


def test_every_browser_a_process_launches_shares_one_priority_watcher(monkeypatch):
    passes = []
    monkeypatch.setattr(appdriver, "normal_priority", lambda: passes.append(1))
    for _ in range(3):  # three browsers launched: each puts Chromium back at once, one thread keeps watching
        appdriver.keep_normal_priority()
    watchers = [t for t in threading.enumerate() if t.name == "chromium-priority"]
    assert len(watchers) == 1 and len(passes) >= 3


def test_the_tests_take_the_headless_shell_where_installed_and_the_benchmarks_the_full_browser(monkeypatch, tmp_path):
    monkeypatch.delenv("TWO_BENDS_TEST_BROWSER", raising=False)
    shell = tmp_path / "chromium-headless-shell"
    monkeypatch.setattr(appdriver, "HEADLESS_SHELL", str(shell))
    assert appdriver.browser_under_test() == appdriver.CHROMIUM  # no shell: the full browser
    shell.touch()
    assert appdriver.browser_under_test() == str(shell)
    monkeypatch.setenv("TWO_BENDS_TEST_BROWSER", "/usr/bin/chromium")  # chosen by hand, as to compare the two
    assert appdriver.browser_under_test() == "/usr/bin/chromium"
