"""Shared fixtures: tiny random models (fast, offline) and the real bundled SmolLM2 (session-wide)."""
import atexit
import functools
import os
import shutil
import tempfile
import time
from pathlib import Path

# In the suite's parallel runs (xdist, as many workers as cores) each worker runs torch's 2 OpenMP threads, and so do
# the servers its tests start: a thread that reaches a barrier first spins there while its partner waits for a core
# another worker holds, burning that core (the C step's SmolLM2 test took 3 s of CPU alone, 23 s beside another worker).
# There, waiting threads sleep instead (read when torch loads, so set before it); the same code and fast paths run,
# and the timed tests, which have the machine to themselves, keep a user's default (`machine_to_itself`).
PASSIVE_SET_HERE = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1 and "OMP_WAIT_POLICY" not in os.environ
if PASSIVE_SET_HERE:
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"

import pytest  # noqa: E402
import torch  # noqa: E402

import engine  # noqa: E402
from tests import navigation_only as keep_navigation  # noqa: E402
from tests import other_workers  # noqa: E402

os.environ.setdefault("TWO_BENDS_MODEL", "tiny-llama")  # AppTests use the tiny model unless a test says otherwise
# AppTests run the scheduler in a thread; a browser test's dashboard inherits this unless it sets its own
os.environ.setdefault("TWO_BENDS_WORKER", "thread")
# Every model loads as a user's first start loads it on this machine: the fast paths measured here (their verdicts and
# the C libraries kept in the model cache, so each is measured and built once per machine, not per test process).
# `pytest --backends=plain` runs everything on the eager reference instead: the one switch that forces the fallbacks.
torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))


def _lighter_app_tests() -> None:
    """Two costs of Streamlit 1.67's AppTest that are the harness's, not the app's (pinned version; both measured):
    - at its first run each AppTest reads the metadata of every distribution in the venv, looking for custom
      components (~0.1 s of CPU each time); the venv does not change during a run, so each test process reads it once
      (a real server reads it once, at its start);
    - while a script runs, the test's thread wakes every millisecond to ask whether it has ended, taking the GIL
      from the script it waits for. It now waits on the script's thread itself, then asks as before (the same answer,
      the same timeout and error: the original takes over for whatever time is left).
    The page tests of tests/pages/labs, tests/pages/room and Home/Timing, one process: 68 s before, 57 s with the
    first, 52 s with both (55, 44, 38 s of user CPU)."""
    from streamlit.components.v2 import manifest_scanner
    from streamlit.testing.v1 import local_script_runner

    manifest_scanner.scan_component_manifests = functools.cache(manifest_scanner.scan_component_manifests)
    polling = local_script_runner.require_widgets_deltas

    def wait_for_the_script(runner, timeout: float = 3) -> None:
        began = time.monotonic()
        thread = getattr(runner, "_script_thread", None)
        if thread is not None:
            thread.join(timeout)
        if runner.script_stopped():
            return
        left = timeout - (time.monotonic() - began)
        if left > 0:  # the thread ended without saying so: the original's wait, for the time left
            polling(runner, left)
            return
        runner.request_stop()  # the original's ending after its timeout, word for word
        runner.join()
        raise RuntimeError(f"AppTest script run timed out after {timeout}(s)")

    local_script_runner.require_widgets_deltas = wait_for_the_script


def _c_libraries_compiled_once(keep: Path) -> None:
    """Each C library compiled once per test process, as a user's machine compiles it once: many tests load a model
    into a fresh cache folder of their own, and each such load compiled the C kernels again (28 compiles, ~20 s of
    CPU in the parallel part). A library's file name is the hash of all that makes it (source, flags, compiler, CPU,
    instruction-set caps: c_build.build), so a later build of the same name gets a copy of the first, kept in `keep`
    (not in the test's folder, which a test may damage on purpose); a new name, or another compiler, compiles."""
    from engine.techniques import c_build

    compile_for_real = c_build._compile

    def compile_once(cc: str, source: Path, path: Path) -> Path:
        kept = keep / Path(cc).name / path.name
        if not kept.is_file():
            compile_for_real(cc, source, path)
            kept.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, kept)
            return path
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.copy")
        shutil.copyfile(kept, tmp)
        os.replace(tmp, path)  # whole or not at all, as a compile writes it
        return path

    c_build._compile = compile_once


def pytest_addoption(parser):
    parser.addoption("--backends", choices=("default", "plain"), default="default",
                     help="plain: every model on the eager reference (TWO_BENDS_BACKENDS=plain), not the fast paths "
                          "measured on this machine")
    parser.addoption("--alone-only", action="store_true",
                     help="collect only the files in ALONE_PATHS (the browser, vLLM and timed tests' part)")


def pytest_configure(config):
    if not config.getoption("--alone-only"):  # the browser, vLLM and timed parts run no AppTest: no Streamlit import
        _lighter_app_tests()
    keep = Path(tempfile.mkdtemp(prefix="two-bends-c-once-"))
    atexit.register(shutil.rmtree, keep, ignore_errors=True)
    _c_libraries_compiled_once(keep)
    if config.getoption("--backends") == "plain":
        os.environ["TWO_BENDS_BACKENDS"] = "plain"  # read at each load (engine/techniques/fast_paths.py)
    if (worker := other_workers.this_worker(config)) is not None:
        other_workers.started(*worker)


def pytest_configure_node(node):
    """xdist's controller, for each worker it starts: the folder where the session's workers say they have ended."""
    if not hasattr(node.config, "_two_bends_workers_folder"):
        node.config._two_bends_workers_folder = Path(tempfile.mkdtemp(prefix="two-bends-workers-"))
        atexit.register(shutil.rmtree, node.config._two_bends_workers_folder, ignore_errors=True)
    other_workers.give_folder(node.workerinput, node.config._two_bends_workers_folder)


@pytest.fixture
def machine_to_itself(request, monkeypatch):
    """For a `timed` test, which runs last in the browser part's session (`next_unit`): call the returned function
    once set up (a dashboard started, a room joined, the model loaded: work done beside the other workers' last
    units), and it returns once every other worker has ended and the cores are quiet, saying how long that took.
    The test's own servers keep a user's default threads (no OMP_WAIT_POLICY from this suite)."""
    from engine.host.proc_stat import wait_for_quiet

    if PASSIVE_SET_HERE:
        monkeypatch.delenv("OMP_WAIT_POLICY")
    folder, me = other_workers.this_worker(request.config) or (None, "")

    def wait() -> str:
        others_s = other_workers.wait_for_the_others(folder, me, most_s=1200)
        quiet_s, quiet = wait_for_quiet(0.0, 30.0)
        return (f"# waited {others_s:.1f} s for {len(other_workers.others(folder, me))} other worker(s) to end, "
                f"then {quiet_s:.1f} s for quiet cores"
                + ("" if quiet is not False else " (not quiet after 30 s: measuring anyway)"))
    return wait


@pytest.fixture(autouse=True)
def runs_start_on_every_thread():
    """Each test's first run starts on every thread, as after a run that kept them all: what this suite's own
    subprocesses and browsers did before it (other programs to engine/host/machine_load.py) must not decide the
    thread split of a test's prefill (results can differ in the last bits from 1 to 2 threads). The tests of that
    rule give generate() or Batch a LoadWatch of their own; the decode loop's governor still runs."""
    from engine.host.machine_load import WATCH

    WATCH.mark(torch.get_num_threads())


@pytest.fixture(scope="session")
def tiny_llama() -> engine.LoadedModel:
    return engine.load_model("tiny-llama", device="cpu")


@pytest.fixture(scope="session")
def tiny_gpt2() -> engine.LoadedModel:
    return engine.load_model("tiny-gpt2", device="cpu")


@pytest.fixture(scope="session")
def smollm() -> engine.LoadedModel:
    """The real SmolLM2-135M (converted once by `python -m engine prepare`, then ~1-4 s to load)."""
    return engine.load_model("smollm2-135m", device="cpu")


@pytest.fixture(scope="session")
def smollm_tokenizer():
    """The real SmolLM2's tokenizer alone, read from the converted cache (no weights, no kernels: milliseconds)."""
    from engine.loading import model_store, tokenizer_file

    if not model_store.bundled_converted():  # not converted yet (scripts/test.sh runs `engine prepare` first): load it
        return engine.load_model("smollm2-135m", device="cpu").tokenizer
    return tokenizer_file.read_cached(str(model_store.bundled_folder()))


@pytest.fixture
def navigation_only(monkeypatch):
    """Every AppTest run goes through app.py (tests.navigation_only says why)."""
    keep_navigation(monkeypatch)


# --- one real vLLM (chunked prefill on) for every test that asks for it, stopped after the last of them ---------
# Starting vLLM costs 25-30 s on 2 cores: its tests run one after another (collection order below), share one
# server, and it stops as soon as the next test does not need it (idle, it would still take CPU from later tests).
VLLM_FIXTURES = ("vllm_chunked", "vllm_url")
_shared_vllm: dict = {}  # "server": the open context manager, "value": (url, log); "failed": why it did not start


def _uses_vllm(item) -> bool:
    return any(name in getattr(item, "fixturenames", ()) for name in VLLM_FIXTURES)


def _alone(item) -> bool:
    """A real browser or a real vLLM: each starts servers of its own, so scripts/test.sh runs these after the rest,
    a file at a time on each worker (its dashboard, or the one shared vLLM, started once)."""
    return item.path.parent.name == "browser" or _uses_vllm(item) or "vllm" in item.path.name


# The folders and files that hold every test run alone (marked, or by _alone): `--alone-only` collects these alone, so
# the browser part's workers and the timed run do not import the whole suite (~6 s of CPU each); a test run alone
# anywhere else fails every full collection (the parallel part's) until its place is named here.
ALONE_PATHS = ("tests/browser", "tests/engine/serving/client", "tests/ui/engine_link",
               "tests/engine/labs/test_bench_llamacpp.py")


def _in_alone_paths(path) -> bool:
    relative = path.resolve().relative_to(Path(__file__).resolve().parents[1]).as_posix()
    return any(relative == place or relative.startswith(place + "/") for place in ALONE_PATHS)


def pytest_ignore_collect(collection_path, config):
    if config.getoption("--alone-only") and collection_path.suffix == ".py" and collection_path.name != "conftest.py":
        return not _in_alone_paths(collection_path) or None  # None: pytest's own rules decide
    return None


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by mark
def pytest_collection_modifyitems(items):
    for item in items:
        if _alone(item):
            item.add_marker(pytest.mark.alone)
        if (item.get_closest_marker("alone") or item.get_closest_marker("timed")) and not _in_alone_paths(item.path):
            raise pytest.UsageError(f"{item.nodeid} runs alone, outside ALONE_PATHS (tests/conftest.py): name its "
                                    "file or folder there, or `--alone-only` never collects it")
        if item.get_closest_marker("timed") and (unit_of(item.nodeid) != TIMED
                                                 or "machine_to_itself" not in item.fixturenames):
            raise pytest.UsageError(f"{item.nodeid} is timed: its file belongs in TIMED_FILES (tests/conftest.py), so "
                                    "xdist runs it last, and it waits for `machine_to_itself` before it measures")
    users = [item for item in items if _uses_vllm(item)]
    if users:
        first, others = items.index(users[0]), [item for item in items if not _uses_vllm(item)]
        items[:] = others[:first] + users + others[first:]


# --- how xdist hands out the work (`-n N --dist loadfile`) ---------------------------------------------------------
# A file's tests stay on one worker, in order, so its module fixtures (a dashboard, a room) start once; every file
# that uses vLLM is one unit, so the shared vLLM starts once, and the browser files that share one Chromium and one
# dashboard per environment (tests/browser/shared.py) are one unit per group, their dashboards and browser stopped when
# the unit ends. (xdist's own `--dist loadgroup` cannot group here: on pytest 9 the group suffix it writes into
# `item._nodeid` no longer reaches the node id.) vLLM's unit goes first: its tests compare what our client saw with
# vLLM's own histograms, and beside a room of browsers starting up (or aiperf and llama.cpp's bench) our client's TTFT
# read 45-80 % above vLLM's, so it runs beside the longest unit, one page at a time on a tiny model. Then the longest
# units go first, so no worker is left with a long one at the end while the others idle. The timed files go last, as
# one unit: their tests set up beside the other workers' last units, then wait until those have ended
# (`machine_to_itself`). SECONDS: each unit's setup and calls as measured on 2 cores, a file not named counting 5.
VLLM, TIMED = "vllm", "timed"
TIMED_FILES = ("tests/browser/test_room_fairness_bound.py",)
SHARED_UNITS = {
    "tiny and replay dashboards": ("presenter", "fit_1280", "dark_theme", "lab_traffic", "run_history",
                                   "crowd_blank_tab"),
    "SmolLM2 dashboard": ("lesson", "run_every_page"),
}
SHARED_FILES = {f"tests/browser/test_{name}.py": unit for unit, names in SHARED_UNITS.items() for name in names}
SECONDS = {
    VLLM: 70, "tiny and replay dashboards": 99, "SmolLM2 dashboard": 70,
    "tests/engine/serving/client/test_benchmark_clients.py": 16,
    "tests/browser/test_room_class.py": 65, "tests/browser/test_room_gate.py": 30,
    "tests/browser/test_room_restart.py": 39, "tests/browser/test_crowd.py": 34,
    "tests/engine/labs/test_bench_llamacpp.py": 25,
    "tests/browser/test_fast_start.py": 8, "tests/browser/test_deep_links.py": 8,
    "tests/engine/techniques/test_compiled_decode.py": 28, "tests/pages/test_shipped_links.py": 25,
    "tests/pages/story/test_presets.py": 24, "tests/engine/techniques/test_kernels.py": 18,
    "tests/engine/test_smollm_end_to_end.py": 16, "tests/engine/techniques/test_c_decode.py": 16,
    "tests/ui/controls/test_lesson_panel.py": 11, "tests/pages/story/test_home_timing.py": 11,
}


def unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to: 'vllm' for every file with vLLM in its name, 'timed' for TIMED_FILES, its
    group's name for a file in SHARED_UNITS, else its file."""
    path = nodeid.split("::", 1)[0]
    if path in TIMED_FILES:
        return TIMED
    return VLLM if "vllm" in path.rsplit("/", 1)[-1] else SHARED_FILES.get(path, path)


def _llamacpp_installed() -> bool:
    from engine.labs import bench_llamacpp
    from engine.loading.model_store import DEFAULT_MODEL

    return bench_llamacpp.available(DEFAULT_MODEL, "f32") is None


def _aiperf_installed() -> bool:
    from benchmarks.serving_clients import installed

    return installed("aiperf")


# units whose tests skip at once where their tool is not installed (its venv is not part of the suite's set-up): counted
# long there, they were handed out as long work while real work waited behind them
NEEDS_TOOL = {"tests/engine/labs/test_bench_llamacpp.py": _llamacpp_installed,
              "tests/engine/serving/client/test_benchmark_clients.py": _aiperf_installed}


@functools.cache
def expected_seconds(unit: str) -> float:
    installed = NEEDS_TOOL.get(unit)
    return 0.0 if installed is not None and not installed() else SECONDS.get(unit, 5)


def next_unit(waiting: list[str]) -> str:
    """Which of the waiting units (in collection order) a free worker takes: vLLM's first, then the longest (the first
    of equals), the timed unit only when nothing else waits."""
    if VLLM in waiting:
        return VLLM
    if waiting == [TIMED]:
        return TIMED
    return max((expected_seconds(unit), -i, unit) for i, unit in enumerate(waiting) if unit != TIMED)[2]


def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class LongestFileFirst(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

        def _assign_work_unit(self, node) -> None:
            self.workqueue.move_to_end(next_unit(list(self.workqueue)), last=False)
            super()._assign_work_unit(node)

        def _reschedule(self, node) -> None:
            """A node's next unit is chosen when its last pending test is about to run, not two tests before (xdist's
            own heuristic): a worker runs a test only once it holds the next one, so one test ahead is the least it
            can hold, and a unit chosen earlier waits behind the current one while another worker may run out of work
            (the browser part ended with deep links and the fast-start test queued on one worker, the other idle)."""
            if node.shutting_down:
                return
            if not self.workqueue:
                node.shutdown()
                return
            if self._pending_of(self.assigned_work[node]) <= 1:
                self._assign_work_unit(node)

    return LongestFileFirst(config, log)


@pytest.fixture
def vllm_chunked():
    """(url, log path) of the shared vLLM with chunked prefill on (tests/serving_helpers.vllm_server)."""
    if "failed" in _shared_vllm:  # did not start for an earlier test: the same outcome, not another 10-minute wait
        raise _shared_vllm["failed"]
    if "server" not in _shared_vllm:
        from tests.serving_helpers import vllm_server

        server = vllm_server("on")
        try:
            _shared_vllm["value"] = server.__enter__()  # skips (pytest.skip) when vLLM is not installed
        except BaseException as exc:  # skipped, or failed to start
            _shared_vllm["failed"] = exc
            raise
        _shared_vllm["server"] = server
    return _shared_vllm["value"]


@pytest.fixture
def vllm_url(vllm_chunked):
    return vllm_chunked[0]


def _stop_shared_vllm() -> None:
    if "server" in _shared_vllm:
        _shared_vllm.pop("value")
        _shared_vllm.pop("server").__exit__(None, None, None)


def _stop_shared_dashboards() -> None:
    import sys

    if "tests.browser.shared" in sys.modules:  # imported only where a shared file ran
        sys.modules["tests.browser.shared"].stop()


@pytest.hookimpl(trylast=True)  # after the test's own fixtures are torn down
def pytest_runtest_teardown(item, nextitem):
    if nextitem is None or not _uses_vllm(nextitem):
        _stop_shared_vllm()
    if nextitem is None or unit_of(nextitem.nodeid) != unit_of(item.nodeid):
        _stop_shared_dashboards()


def pytest_sessionfinish(session, exitstatus):
    _stop_shared_vllm()  # an interrupted run (Ctrl-C, -x) never reaches the teardown after its last vLLM test
    _stop_shared_dashboards()
    if (worker := other_workers.this_worker(session.config)) is not None:
        other_workers.ended(*worker)  # all of this worker's servers stopped
