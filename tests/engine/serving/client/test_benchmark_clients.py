"""aiperf, a benchmark client users pick, against `engine serve` as docs/serving.md shows it: every request answered,
its means within AGREE of the server's own /metrics, and our per-request histogram read by its metrics scraper.

aiperf lives in a venv of its own (benchmarks/serving_clients.py says how to make one). The suite does not install
it: that takes the network and a 1.2 GB venv with its own transformers, so the test skips, saying so, where the venv
is missing (TWO_BENDS_AIPERF_VENV points elsewhere). CPU-heavy: scripts/test.sh runs it in the browser part.
"""
import pytest

from benchmarks.serving_clients import Load, installed, run, venv
from tests.serving_helpers import free_port, means_agree_in_one_of_two

pytestmark = pytest.mark.alone
AGREE = 0.20  # the client's clock and the server's differ by the HTTP hop (measured within 2.4 %, docs/serving.md)
REQUESTS = 4


def test_aiperf_runs_against_our_server_and_agrees_with_its_metrics():
    """Run at most twice: with browser tests beside it, aiperf's TTFT read 22–23 % above the server's in two runs of
    the suite (212 against 173 ms), its client waiting for a core; a wrong reading disagrees both times."""
    if not installed("aiperf"):
        pytest.skip(f"aiperf==0.13.0 is not installed in {venv('aiperf')} (see benchmarks/serving_clients.py)")
    def measure() -> dict:
        got = run("aiperf", "queue", Load(requests=REQUESTS, prompt_tokens=64, output_tokens=8), free_port(),
                  timeout=600)
        client, server = got["client"], got["server"]
        assert (client["completed"], client["failed"], server["completed"]) == (REQUESTS, 0, REQUESTS)
        count, mean = client["scraped_itl"]  # aiperf's own reading of vllm:request_time_per_output_token_seconds
        assert count == REQUESTS and mean == pytest.approx(server["itl"], rel=0.01)  # the same numbers: no timing
        return {key: (client[key], server[key]) for key in ("ttft", "itl", "e2e")}

    means_agree_in_one_of_two(measure, AGREE, "aiperf, the server's /metrics")
