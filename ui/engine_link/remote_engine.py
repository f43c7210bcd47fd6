"""A room bigger than one machine: every Run goes to an existing OpenAI-compatible server, timed from outside.

`two-bends dashboard --room --engine-url URL` sets TWO_BENDS_ENGINE_URL. The URL must be on the operator's allow-list
(TWO_BENDS_MEASURE_HOSTS, as for the Measure-a-server page): a class dashboard never sends prompts to an address the
operator did not list. RemoteEngine is an EngineClient (ui/engine_link/client.py), like the local worker: each Run is
measured in a child process (ui/engine_link/remote_measure.py); queue time comes from the server's own /metrics where it
has vLLM's names. The result is a Trace with source "server", drawn by the Home and Timing pages. Streamlit-free.
"""
from __future__ import annotations

import threading
from dataclasses import replace

from engine.errors import EngineError
from engine.serving.client.server_benchmark import trace_from_record
from engine.serving.scheduling.work import Done, Failed, Progress, Request, Started, Work
from ui.engine_link import server_measurement
from ui.engine_link.remote_measure import command

RUN_LIMIT_S = 600.0  # the whole child process, whatever the server does


class RemoteEngine:
    """The room's serving engine at `url` behind the EngineClient interface: Requests only (a lab measures the
    machine the dashboard runs on, so Jobs stay with the local worker)."""

    def __init__(self, url: str):
        self.url = url

    def submit(self, work: Work) -> Work:
        if not isinstance(work, Request):
            raise EngineError(f"the room's serving engine at {self.url} takes Runs only; lab measurements run here")
        cmd = command(self.url, work)
        threading.Thread(target=_run, args=(work, cmd, self.url), name="two-bends-remote-run", daemon=True).start()
        return work

    def cancel(self, work: Work) -> None:
        work.cancel()  # the watcher kills the child process

    def status(self) -> dict:
        return dict(mode="remote", url=self.url)


def queue_seconds(rec: dict) -> float:
    """The server's own queue time for this request (vLLM's request_queue_time), 0 when it does not say. The scrapes
    bracket this request, so with other students' requests ending inside that window it is their mean."""
    queue = (rec.get("server_metrics") or {}).get("queue")
    return float(queue["mean_seconds"]) if queue else 0.0


def to_trace(rec: dict, local_spec: list | None = None):
    """The measured request as a Trace (source "server"), with what a local replay needs in its settings."""
    trace = trace_from_record(rec)
    trace.queue_seconds = queue_seconds(rec)
    trace.settings.update(remote_model=rec["model"], local_model=rec.get("local_model"),
                          same_model=bool(rec.get("same_model")), sampling=rec.get("sampling"),
                          replay_spec=list(local_spec) if local_spec and rec.get("same_model") else None)
    if rec.get("sampling"):
        trace.settings["temperature"] = rec["sampling"].get("temperature", 0.0)
    return trace


def with_local_insides(server, local):
    """The server's run with the insides of the local engine's untimed replay of the same prompt: attention, KV
    cache, config and tokens from `local`; every timing (TTFT, each gap, queue) from `server`."""
    n = min(len(server.steps), len(local.steps))
    steps = [replace(local.steps[k], seconds=server.steps[k].seconds) for k in range(n)]
    n_out = n + 1
    agree = next((k for k, (a, b) in enumerate(zip(server.output_ids, local.output_ids)) if a != b),
                 min(len(server.output_ids), len(local.output_ids)))
    replayed = {"model": local.model, "device": local.device, "dtype": local.dtype, "tokens_agree": agree}
    return replace(local, output_ids=local.output_ids[:n_out], output_tokens=local.output_tokens[:n_out],
                   prefill_seconds=server.prefill_seconds, steps=steps, queue_seconds=server.queue_seconds,
                   warmup_seconds=0.0, capture_seconds=0.0, device=server.device, env=dict(server.env),
                   settings=dict(server.settings, replayed_locally=replayed), source="server")


def _run(work: Request, cmd: list[str], url: str) -> None:
    work.emit(Progress(f"Sent to the room's serving engine at {url}: timed from outside, tokens arrive at the end", -1))
    procs, finished = [], threading.Event()

    def started(proc) -> None:
        procs.append(proc)
        if work.cancelled.is_set():  # cancelled before the child even started
            proc.kill()

    def watch() -> None:
        while not finished.is_set():
            if work.cancelled.wait(0.2):
                for proc in procs:
                    proc.kill()
                return

    threading.Thread(target=watch, daemon=True).start()
    try:
        records = server_measurement.run_measurement(cmd, limit_s=RUN_LIMIT_S, on_start=started)
    except EngineError as exc:
        work.emit(Failed("cancelled", cancelled=True) if work.cancelled.is_set() else Failed(str(exc)))
        return
    finally:
        finished.set()  # ends the watcher (the child is gone either way)
    if work.cancelled.is_set():
        work.emit(Failed("cancelled", cancelled=True))
        return
    if not records:
        work.emit(Failed(f"{url} sent no measured request back"))
        return
    rec = records[-1]
    work.emit(Started(queue_seconds(rec)))
    local = work.model  # the local engine's model, on which this run can be replayed for its insides
    work.emit(Done(to_trace(rec, [local.name, local.device, local.dtype, local.kernels])))
