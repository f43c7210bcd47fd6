"""How many students this machine holds: a class in real Chromium against the README's command, measured end to end.

The dashboard starts as a teacher starts it (`python -m two_bends_cli dashboard --room ...`, what scripts/dashboard.sh
runs after its set-up), in queue or batch mode. A teacher joins and opens a poll round; N students, each in a browser
context of its own, join with the code staggered over `--join-over` seconds, sit idle for `--idle` seconds, press Run
at a random moment over `--run-over` seconds, then open the poll and answer it. Per student it records the join time,
page exceptions, blank tabs (Streamlit's frontend crash: the app's root gone), the queue wait and run numbers the page
showed (TTFT, TPOT, total) and the wall time from the click to the finished line. The server's own CPU is read from
/proc for the Streamlit process and the engine worker separately (the browsers run on this machine too, and are not
the server's cost): per idle student per second, and per run while the class presses Run.

A room size holds when every student joined, every run finished within `--within` seconds of its click, no tab went
blank (no "Bad delta path index" either: the tab's own watch, ui/controls/tab_watch.py, may have reloaded it before
the harness looked) and no page showed an exception. Sizes are tried in increasing order per mode; the largest that held is the
machine's size for that mode ("at least N" when every size tried held). The result is written to the user's data
folder (ui/room/room_size.py reads it for the teacher console), never into the checkout.

Usage: .venv/bin/python -m benchmarks.room_size --sizes 4,8,12 --modes queue,batch
       .venv/bin/python -m benchmarks.room_size --sizes 3 --modes queue --no-save    (a quick look, nothing kept)
Browsers share the machine with the server: a real class's browsers run on the students' laptops, so this measures a
harder room than a real one (say so when quoting it).
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._browser import FINISHED, finished, settle
from benchmarks._servers import cpu_s
from engine.loading.model_store import DEFAULT_MODEL  # torch-free
from tests.browser import appdriver
from ui.room import room_size

CRASH = "Bad delta path index"  # Streamlit 1.67's frontend error that leaves a tab blank
CODE, TEACHER = "CROWD7", "TEACH7"
TWICE = "×2 — it grows with the prompt (×1.4 to ×2.8)"  # assets/polls/1-double-the-prompt.json


@dataclasses.dataclass
class Student:
    """What one student's browser saw."""
    index: int
    join_s: float | None = None  # from opening the link to the first page settled after Join
    queue_s: float | None = None  # as the page showed it
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    total_s: float | None = None
    wall_s: float | None = None  # click on Run to the finished line
    answered: bool = False
    exceptions: list = dataclasses.field(default_factory=list)  # the page's stException texts
    blank_tabs: int = 0  # times the harness found the tab blank (Streamlit's frontend crashed) and reloaded it
    crashes: int = 0  # the frontend's "Bad delta path index" errors (the tab's own watch may have reloaded it first)
    failure: str | None = None


def server_cpu(pid: int) -> tuple[float, float]:
    """(Streamlit process, engine worker and anything else it started) CPU seconds so far."""
    return cpu_s(pid), sum(cpu_s(child) for child in appdriver.descendants(pid))


# --- the README's command --------------------------------------------------------------------------------------------
@contextlib.contextmanager
def room_server(mode: str, model: str, log: Path, ready_s: float = 300.0):
    """`two-bends dashboard --room` (the package's entry point, from the checkout) in `mode`; yields (url, pid)."""
    port = appdriver.free_port()
    cmd = [sys.executable, "-m", "two_bends_cli", "dashboard", "--room", "--mode", mode, "--code", CODE,
           "--teacher-code", TEACHER, "--data-dir", tempfile.mkdtemp(prefix="two_bends_crowd_"),
           "--server.headless", "true", "--server.port", str(port), "--browser.gatherUsageStats", "false"]
    env = dict(os.environ, PYTHONUNBUFFERED="1", TWO_BENDS_MODEL=model)
    env.pop("TWO_BENDS_WORKER", None)  # the README's default: the engine in a worker process of its own
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=appdriver.ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        appdriver.wait_for_port(port, 180)
        if appdriver.wait_for_kernels(log, ready_s) is None:
            print(f"# the worker's model was not ready after {ready_s:.0f} s: measuring anyway", flush=True)
        yield f"http://127.0.0.1:{port}", proc.pid
    finally:
        appdriver.stop_server(proc)


# --- one student's browser -------------------------------------------------------------------------------------------
async def join(page, url: str, code: str, timeout_ms: int) -> None:
    await page.goto(url, timeout=timeout_ms, wait_until="commit")
    field = page.get_by_label("Room code (on the projector)")
    await field.wait_for(timeout=timeout_ms)
    await field.fill(code)
    await page.get_by_role("button", name="Join").click()
    await page.locator("[data-testid='stSidebarNav']").wait_for(timeout=timeout_ms)
    await settle(page, timeout_ms)


async def recover(page, me: Student, crashed: list, timeout_ms: int) -> None:
    """A tab whose frontend crashed (its app root gone): reloaded, as a student presses F5; the browser's sign-in
    cookie brings it back in without the code."""
    if crashed and not await page.locator("[data-testid='stApp']").count():
        crashed.clear()
        me.blank_tabs += 1
        await page.reload(wait_until="commit", timeout=timeout_ms)
        await page.locator("[data-testid='stSidebarNav']").wait_for(timeout=timeout_ms)
        await settle(page, timeout_ms)


async def exceptions(page) -> list[str]:
    errors = page.locator("[data-testid='stException']")
    return [(await errors.nth(i).inner_text())[:200] for i in range(await errors.count())]


async def student(browser, url: str, me: Student, join_at: float, run_after: float, t0: float, idle_over: asyncio.Event,
                  timeout_ms: int) -> None:
    """Joins `join_at` s after t0; presses Run `run_after` s after the class's idle window ended (so no run falls
    inside the window whose CPU is the idle cost, even when joining took longer than planned)."""
    await asyncio.sleep(max(0.0, t0 + join_at - time.monotonic()))
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(timeout_ms)
    crashed: list = []
    try:
        page = await context.new_page()
        def on_error(exc) -> None:
            if CRASH in str(exc):
                crashed.append(str(exc))
                me.crashes += 1

        page.on("pageerror", on_error)
        began = time.monotonic()
        await join(page, url, CODE.lower(), timeout_ms)
        me.join_s = time.monotonic() - began
        await idle_over.wait()
        await asyncio.sleep(run_after)
        await recover(page, me, crashed, timeout_ms)
        began = time.monotonic()
        await page.locator("[data-testid='stSidebar']").get_by_role("button", name="Run", exact=True).click()
        line = page.get_by_text(FINISHED).first
        while True:  # the finished line, reloading a tab that went blank meanwhile (its run goes on in the engine)
            try:
                await line.wait_for(timeout=2_000)
                break
            except Exception:  # noqa: BLE001 - playwright's TimeoutError: not yet
                await recover(page, me, crashed, timeout_ms)
                if time.monotonic() - began > timeout_ms / 1000:
                    raise
        me.wall_s = time.monotonic() - began
        shown = await finished(page)
        me.ttft_ms, me.total_s, me.queue_s, me.tpot_ms = (shown[k] for k in ("ttft_ms", "total_s", "queue_s", "tpot_ms"))
        me.exceptions += await exceptions(page)
        await page.goto(f"{url}/poll", wait_until="commit", timeout=timeout_ms)  # signed in: no code asked again
        await page.get_by_text(TWICE).first.wait_for(timeout=timeout_ms)
        await page.get_by_text(TWICE).first.click()
        await page.get_by_text("You may change it until the answers lock").first.wait_for(timeout=timeout_ms)
        me.answered = True
        await recover(page, me, crashed, timeout_ms)
        me.exceptions += await exceptions(page)
    except Exception as exc:  # noqa: BLE001 - a student who could not finish is the room's failure, not the script's
        me.failure = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    finally:
        await context.close()


async def teacher_opens_poll(browser, url: str, timeout_ms: int):
    """The teacher's tab: joined with the teacher code, a poll round open (students answer it after their run)."""
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    await join(page, f"{url}/poll", TEACHER.lower(), timeout_ms)
    await page.get_by_role("heading", name="Predict, then measure").first.wait_for(timeout=timeout_ms)
    await page.locator(".st-key-poll_open button").first.click()
    await page.get_by_text("stay hidden, here too").first.wait_for(timeout=timeout_ms)
    return context


@dataclasses.dataclass
class Room:
    """One class of `size` students in one mode: each student's record and the server's CPU."""
    mode: str
    size: int
    within_s: float
    students: list
    elapsed_s: float
    idle_s: float
    idle_cpu: tuple  # (streamlit, worker) CPU seconds over the idle window
    active_cpu: tuple  # (streamlit, worker) CPU seconds from the first Run to the last answer
    load_before: float

    @property
    def held(self) -> bool:
        return all(s.failure is None and not s.exceptions and not s.blank_tabs and not s.crashes and s.wall_s is not None
                   and s.wall_s <= self.within_s and s.answered for s in self.students)

    def summary(self) -> dict:
        walls = [s.wall_s for s in self.students if s.wall_s is not None]
        tpots = [s.tpot_ms for s in self.students if s.tpot_ms is not None]
        queue = [s.queue_s for s in self.students if s.queue_s is not None]
        joins = [s.join_s for s in self.students if s.join_s is not None]
        totals = [s.total_s for s in self.students if s.total_s is not None]
        return dict(mode=self.mode, size=self.size, held=self.held, within_s=self.within_s,
                    runs_finished=len(walls), blank_tabs=sum(s.blank_tabs for s in self.students),
                    crashes=sum(s.crashes for s in self.students),
                    exceptions=sum(len(s.exceptions) for s in self.students),
                    failures=[f"student {s.index}: {s.failure}" for s in self.students if s.failure],
                    join_s_max=max(joins, default=None), wall_s_max=max(walls, default=None),
                    queue_s_max=max(queue, default=None), run_s_median=statistics.median(totals) if totals else None,
                    tpot_ms_median=statistics.median(tpots) if tpots else None,
                    tpot_ms_max=max(tpots, default=None),
                    idle_cpu_per_student_per_s=[round(c / self.idle_s / self.size, 5) for c in self.idle_cpu],
                    cpu_per_run_s=[round(c / self.size, 4) for c in self.active_cpu],
                    load_before=round(self.load_before, 2), elapsed_s=round(self.elapsed_s, 1),
                    students=[dataclasses.asdict(s) for s in self.students])


async def crowd_async(url: str, pid: int, mode: str, size: int, args) -> Room:
    from playwright.async_api import async_playwright

    rng = random.Random(args.seed)
    joins = sorted(rng.uniform(0, args.join_over) for _ in range(size))
    runs = [rng.uniform(0, args.run_over) for _ in range(size)]  # seconds after the idle window
    students = [Student(i) for i in range(size)]
    timeout_ms = int(args.timeout * 1000)
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=args.browser, args=appdriver.BROWSER_ARGS)
        appdriver.keep_normal_priority()
        try:
            teacher = await teacher_opens_poll(browser, url, timeout_ms)
            t0, idle_over = time.monotonic(), asyncio.Event()
            tasks = [asyncio.create_task(student(browser, url, s, j, r, t0, idle_over, timeout_ms))
                     for s, j, r in zip(students, joins, runs)]
            await asyncio.sleep(max(0.0, t0 + args.join_over - time.monotonic()))  # the class joins
            while any(s.join_s is None and s.failure is None for s in students) and not all(t.done() for t in tasks):
                await asyncio.sleep(0.2)  # a slow join is the last student's, not the idle window's
            idle_from, idle_began = server_cpu(pid), time.monotonic()
            await asyncio.sleep(max(1.0, t0 + args.join_over + args.idle - time.monotonic()))
            idle_to, idle_s = server_cpu(pid), time.monotonic() - idle_began
            idle_over.set()  # the students press Run from now on
            await asyncio.gather(*tasks)
            active_to = server_cpu(pid)
            await teacher.close()
        finally:
            await browser.close()
    return Room(mode, size, args.within, students, time.monotonic() - t0, idle_s,
                tuple(b - a for a, b in zip(idle_from, idle_to)), tuple(b - a for a, b in zip(idle_to, active_to)),
                args.load_before)


def crowd(mode: str, size: int, args, log: Path) -> Room:
    """One class of `size` students on a fresh server in `mode`."""
    args.load_before = os.getloadavg()[0]
    with room_server(mode, args.model, log) as (url, pid):
        return asyncio.run(crowd_async(url, pid, mode, size, args))


def defaults(**over) -> argparse.Namespace:
    """The benchmark's settings as a namespace (the crowd test passes its own small ones)."""
    args = parser().parse_args([])
    vars(args).update(over)
    return args


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="4,8", help="room sizes to try, increasing (students; the teacher is extra)")
    ap.add_argument("--modes", default="queue,batch")
    ap.add_argument("--join-over", type=float, default=30.0, help="seconds over which the students join")
    ap.add_argument("--idle", type=float, default=10.0, help="seconds everyone sits idle after joining (idle CPU)")
    ap.add_argument("--run-over", type=float, default=60.0, help="seconds over which the students press Run")
    ap.add_argument("--within", type=float, default=60.0, help="seconds a run may take from its click (queue included)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds any one step may take before it fails")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--browser", default=appdriver.CHROMIUM, help="the Chromium the students use (default: the full browser)")
    ap.add_argument("--no-save", action="store_true", help="print only; keep nothing in the data folder")
    return ap


def main() -> None:
    args = parser().parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} | {socket.gethostname()} | {os.cpu_count()} CPUs | load average "
          f"{os.getloadavg()[0]:.2f} | sizes {sizes} | join over {args.join_over:.0f} s, Run over {args.run_over:.0f} s, "
          f"a run must finish within {args.within:.0f} s | model {args.model}", flush=True)
    result = room_size.new_result(socket.gethostname(), os.cpu_count() or 1, args.model, args.within)
    for mode in args.modes.split(","):
        held, rooms = 0, []
        for size in sizes:
            room = crowd(mode, size, args, Path(tempfile.gettempdir()) / f"two_bends_crowd_{mode}_{size}.log")
            rooms.append(room.summary())
            print(json.dumps({k: v for k, v in rooms[-1].items() if k != "students"}), flush=True)
            if not room.held:
                break
            held = size
        result["modes"][mode] = dict(students=held, every_size_held=held == sizes[-1], smallest_tried=sizes[0],
                                     rooms=rooms)
        print(f"## {mode}: holds {'at least ' if held == sizes[-1] else ''}{held} students", flush=True)
    if not args.no_save:
        path = room_size.save(result)
        print(f"# saved to {path} (the teacher console reads it)")


if __name__ == "__main__":
    main()
