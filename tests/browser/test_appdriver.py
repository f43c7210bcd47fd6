"""tests/browser/appdriver.py's server start and stop (shared by benchmarks/bench_traffic.py and tests/serving_helpers.py)."""
import sys

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
