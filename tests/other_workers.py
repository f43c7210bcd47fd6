"""A test that must have the machine to itself, run inside the browser part's xdist session: it waits until every other
worker of that session has ended (its tests, fixtures, dashboards and browsers torn down), then until the cores are
quiet. Before that wait it may set up beside them (start a dashboard, join a room, load the model), which is work the
suite would otherwise do after the browser part, alone.

Each worker writes `<pid>` to `<folder>/<worker id>.pid` when it starts and `<folder>/<worker id>.done` when its session
ends; the controller hands every worker the same folder (`workerinput`: `this_worker`). A worker counts as ended once its
`.done` is there or its process is gone (a crashed worker writes nothing). Outside xdist there is no one to wait for.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

FOLDER_KEY = "two_bends_workers_folder"


def give_folder(workerinput: dict, folder: Path) -> None:
    """Controller side (pytest_configure_node): the folder every worker of this session writes to."""
    workerinput[FOLDER_KEY] = str(folder)


def this_worker(config) -> tuple[Path, str] | None:
    """(the session's shared folder, this worker's id); None outside xdist (or where the controller gave no folder)."""
    workerinput = getattr(config, "workerinput", None)
    if not workerinput or FOLDER_KEY not in workerinput:
        return None
    return Path(workerinput[FOLDER_KEY]), workerinput["workerid"]


def started(folder: Path, worker: str) -> None:
    (folder / f"{worker}.pid").write_text(str(os.getpid()))


def ended(folder: Path, worker: str) -> None:
    (folder / f"{worker}.done").write_text(str(os.getpid()))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):  # gone (or its number taken by someone else's process)
        return False
    return True


def still_running(folder: Path, me: str) -> list[str]:
    """The other workers that started and have neither ended nor died."""
    running = []
    for pid_file in sorted(folder.glob("*.pid")):
        worker = pid_file.stem
        if worker == me or (folder / f"{worker}.done").exists():
            continue
        try:
            pid = int(pid_file.read_text())
        except ValueError:  # written this instant: count it as running
            running.append(worker)
            continue
        if _alive(pid):
            running.append(worker)
    return running


def others(folder: Path | None, me: str) -> list[str]:
    """The session's other workers (every one that started, ended or not)."""
    return [] if folder is None else [p.stem for p in sorted(folder.glob("*.pid")) if p.stem != me]


def wait_for_the_others(folder: Path | None, me: str, most_s: float, poll_s: float = 0.2,
                        clock=time.monotonic, sleep=time.sleep) -> float:
    """Seconds waited until every other worker ended; TimeoutError naming them after `most_s`."""
    start = clock()
    if folder is None:
        return 0.0
    while running := still_running(folder, me):
        if clock() - start >= most_s:
            raise TimeoutError(f"waited {most_s:.0f} s for the suite's other workers to end; still running: "
                               + ", ".join(running))
        sleep(poll_s)
    return clock() - start
