"""The shared fixtures and hooks in tests/conftest.py do what they say: `navigation_only` keeps every AppTest run off
Streamlit's old pages-directory path (script_runner._mpa_v1), a page switch and reruns included; AppTest's lighter
wait still ends a run when it ends and still stops one that outlasts its timeout; a C library is compiled once per
test process, and a test that damages its copy damages no other test's."""
import time
from pathlib import Path

import pytest
import streamlit.runtime.scriptrunner.script_runner as script_runner
from streamlit.components.v2 import manifest_scanner
from streamlit.testing.v1 import AppTest, local_script_runner

from ui import state

ROOT = Path(__file__).resolve().parents[1]


def test_the_project_has_a_pages_folder_so_the_flag_matters():
    assert (ROOT / "pages").is_dir()  # without one, Streamlit never sets the flag and the fixture has nothing to do


def test_navigation_only_keeps_every_run_on_app_py(monkeypatch, navigation_only):
    old_path = []
    real = script_runner._mpa_v1
    monkeypatch.setattr(script_runner, "_mpa_v1", lambda main: (old_path.append(main), real(main)))

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.session_state[state.MODEL] = "tiny-llama"
    at.run()
    at.switch_page("pages/story/decode.py").run()
    at.run()
    assert not at.exception and old_path == []  # three runs, none on the old path


def test_an_app_test_waits_on_its_script_and_still_times_out():
    assert local_script_runner.require_widgets_deltas.__name__ == "wait_for_the_script"  # tests/conftest.py's wait
    assert hasattr(manifest_scanner.scan_component_manifests, "cache_info")  # read once per process

    def quick():
        import streamlit as st

        st.write("done")

    def slow():
        import time

        import streamlit as st

        st.write("started")
        time.sleep(3)

    began = time.monotonic()
    at = AppTest.from_function(quick, default_timeout=5).run()
    assert at.markdown[0].value == "done" and time.monotonic() - began < 4  # ended when the script did
    with pytest.raises(RuntimeError, match=r"timed out after 0.5\(s\)"):
        AppTest.from_function(slow, default_timeout=0.5).run()


def test_the_browser_and_vllm_tests_and_only_they_run_alone():
    """scripts/test.sh runs `-m "not alone"` on every core, then `-m alone` a file per worker (a run of it that selects
    no test fails): a browser or vLLM test left unmarked would share the machine while it times its work."""
    from types import SimpleNamespace

    from tests.conftest import _alone

    def item(nodeid: str, *fixtures: str):
        return SimpleNamespace(nodeid=nodeid, path=ROOT / nodeid.split("::")[0], fixturenames=fixtures)

    assert _alone(item("tests/browser/test_presenter.py::test_keys"))
    assert _alone(item("tests/engine/serving/client/test_vllm.py::test_off"))  # starts its own vLLM
    assert _alone(item("tests/ui/engine_link/test_x.py::test_y", "tmp_path", "vllm_url"))
    assert not _alone(item("tests/engine/labs/test_bench.py::test_no_timer_always_follows_vllm", "tmp_path"))
    assert not _alone(item("tests/engine/core/test_generate.py::test_cli", "smollm"))


def test_a_test_run_alone_outside_the_alone_paths_stops_the_collection():
    """`--alone-only` collects ALONE_PATHS only: a test run alone elsewhere would silently never run, so a full
    collection (the parallel part's) refuses it, naming the test."""
    import pytest

    from tests.conftest import _in_alone_paths, pytest_collection_modifyitems

    assert _in_alone_paths(ROOT / "tests/browser/test_lesson.py")
    assert _in_alone_paths(ROOT / "tests/engine/labs/test_bench_llamacpp.py")
    assert not _in_alone_paths(ROOT / "tests/engine/labs/test_bench.py")

    class Item:
        def __init__(self, nodeid: str, marked: bool):
            self.nodeid, self.path, self.fixturenames, self.marks = nodeid, ROOT / nodeid.split("::")[0], (), []
            if marked:
                self.marks.append(pytest.mark.alone.mark)

        def add_marker(self, mark):
            self.marks.append(mark)

        def get_closest_marker(self, name):
            return next((m for m in self.marks if m.name == name), None)

    pytest_collection_modifyitems([Item("tests/browser/test_x.py::test_y", False),
                                   Item("tests/engine/labs/test_bench_llamacpp.py::test_y", True)])  # in place
    with pytest.raises(pytest.UsageError, match="tests/engine/core/test_x.py::test_y runs alone, outside ALONE_PATHS"):
        pytest_collection_modifyitems([Item("tests/engine/core/test_x.py::test_y", True)])


def test_vllm_goes_first_beside_the_longest_unit_then_the_longest_first():
    from tests.conftest import SECONDS, SHARED_UNITS, VLLM, next_unit, unit_of

    assert unit_of("tests/ui/engine_link/test_remote_engine_vllm.py::test_a") == VLLM == unit_of(
        "tests/engine/serving/client/test_vllm.py::test_b")
    assert unit_of("tests/browser/test_deep_links.py::test_c") == "tests/browser/test_deep_links.py"
    assert unit_of("tests/browser/test_lesson.py::test_c") == unit_of("tests/browser/test_run_every_page.py::test_d")
    units = [unit_of(f"tests/browser/test_{name}.py::t") for names in SHARED_UNITS.values() for name in names]
    assert set(units) == set(SHARED_UNITS)  # a group's files: one unit, named for the group
    room, small = "tests/browser/test_room_class.py", "tests/x/test_small.py"
    assert next_unit([small, room, VLLM]) == VLLM  # first, wherever it was collected
    assert next_unit([small, room]) == room  # then the longest
    assert next_unit([small, "tests/x/test_other.py"]) == small  # equals: the first
    # so vLLM's companion is the longest other unit: the group that opens one page at a time on a tiny model
    assert max((s, u) for u, s in SECONDS.items() if u != VLLM)[1] == "tiny and replay dashboards"


def test_the_timed_unit_goes_last_and_only_with_its_wait():
    """The timed test sets up beside the other workers' last units and measures once they have ended: handed out
    before other units, a worker would sit waiting while the rest queued behind it."""
    from tests.conftest import TIMED, TIMED_FILES, VLLM, next_unit, pytest_collection_modifyitems, unit_of

    assert unit_of(f"{TIMED_FILES[0]}::test_a") == TIMED
    small = "tests/x/test_small.py"
    assert next_unit([TIMED, small]) == small and next_unit([TIMED, VLLM]) == VLLM and next_unit([TIMED]) == TIMED

    class Item:
        def __init__(self, nodeid: str, fixtures=("machine_to_itself",)):
            self.nodeid, self.path, self.fixturenames = nodeid, ROOT / nodeid.split("::")[0], fixtures

        def add_marker(self, mark):
            pass

        def get_closest_marker(self, name):
            return pytest.mark.timed.mark if name == "timed" else None

    pytest_collection_modifyitems([Item(f"{TIMED_FILES[0]}::test_a")])  # in place: accepted
    for wrong in (Item("tests/browser/test_other.py::test_b"), Item(f"{TIMED_FILES[0]}::test_a", ())):
        with pytest.raises(pytest.UsageError, match="is timed"):
            pytest_collection_modifyitems([wrong])


def test_a_timed_test_waits_until_every_other_worker_ended_or_died(tmp_path):
    import subprocess
    import sys

    from tests import other_workers

    assert other_workers.wait_for_the_others(None, "gw0", most_s=0) == 0.0  # outside xdist: no one to wait for
    other_workers.started(tmp_path, "gw0")  # this process: never waited for by itself
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / "gw1.pid").write_text(str(sleeper.pid))
        clock = iter(range(100))
        with pytest.raises(TimeoutError, match="still running: gw1"):
            other_workers.wait_for_the_others(tmp_path, "gw0", most_s=3, clock=lambda: next(clock), sleep=lambda s: None)
        other_workers.ended(tmp_path, "gw1")  # said it ended
        assert other_workers.still_running(tmp_path, "gw0") == []
        (tmp_path / "gw1.done").unlink()
        assert other_workers.still_running(tmp_path, "gw0") == ["gw1"]
    finally:
        sleeper.kill()
        sleeper.wait()
    assert other_workers.still_running(tmp_path, "gw0") == []  # died without a word (a crashed worker)
    assert other_workers.wait_for_the_others(tmp_path, "gw0", most_s=0) >= 0


def test_a_unit_whose_tool_is_not_installed_counts_as_no_work(monkeypatch):
    import tests.conftest as c

    llamacpp, fast_start = "tests/engine/labs/test_bench_llamacpp.py", "tests/browser/test_fast_start.py"
    for installed, first in ((True, llamacpp), (False, fast_start)):
        c.expected_seconds.cache_clear()
        monkeypatch.setitem(c.NEEDS_TOOL, llamacpp, lambda installed=installed: installed)
        assert c.next_unit([fast_start, llamacpp]) == first  # installed: its 25 s go first; missing: it skips at once
    c.expected_seconds.cache_clear()


def test_a_c_library_is_compiled_once_and_a_damaged_copy_stays_where_it_was(tmp_path, monkeypatch):
    from engine.techniques import c_build, c_decode

    if not c_build.toolchain_fit().ok:
        pytest.skip("the C kernels cannot be built here")
    assert c_build._compile.__name__ == "compile_once"  # tests/conftest.py's memo
    first = c_build.build(tmp_path / "a", c_decode.SOURCE)  # compiled now, or copied from an earlier test's compile
    first.write_bytes(b"damaged on purpose")
    compiles = []
    monkeypatch.setattr(c_build.subprocess, "run", lambda *a, **k: compiles.append(a) or pytest.fail("compiled"))
    second = c_build.build(tmp_path / "b", c_decode.SOURCE)
    assert compiles == [] and second.name == first.name and second.parent != first.parent
    assert c_decode.load(second).decode_step_abi() == c_decode.ABI  # the first compile's library, not the damage
