"""AppTest: the Timing and Home pages show the run's CPU wait next to TTFT/TPOT; quiet timing draws at the end."""
import pytest

from engine.host import cpu_wait
from tests.pages.story.test_home_timing import app, last, run, texts  # noqa: F401 (app is a fixture)
from ui import state


def markdowns(at) -> str:
    return "\n".join(m.value for m in at.markdown)


def test_timing_shows_the_measured_wait_per_token(app):  # noqa: F811
    run(app)
    trace = last(app)
    assert not app.exception and trace.cpu_wait_seconds is not None
    app.switch_page("pages/story/timing.py").run()
    shown = markdowns(app)
    per_token = trace.decode_cpu_wait_seconds / len(trace.steps) * 1e3
    assert f"{per_token:,.1f} ms per token for a CPU" in shown or "had the CPU to itself" in shown
    assert "schedstat" in shown
    steps = app.dataframe[0].value
    assert list(steps["CPU wait (ms)"]) == pytest.approx(
        [trace.prefill_cpu_wait_seconds * 1e3] + [s.cpu_wait_seconds * 1e3 for s in trace.steps])


def test_without_schedstat_the_page_says_so(app, monkeypatch):  # noqa: F811
    monkeypatch.setattr(cpu_wait, "TASKS", "/nonexistent/task")
    run(app)
    assert last(app).cpu_wait_seconds is None
    app.switch_page("pages/story/timing.py").run()
    assert "**CPU wait: not measured** — this system has no per-thread schedstat" in markdowns(app)


def test_quiet_timing_draws_the_text_at_the_end(app):  # noqa: F811
    app.sidebar.toggle(key=state.QUIET_TIMING).set_value(True)
    run(app)
    trace = last(app)
    assert not app.exception and trace.settings["quiet_timing"] is True
    assert trace.text.strip() in texts(app)  # the stream's text, drawn once the run ended
    app.switch_page("pages/story/timing.py").run()
    assert "Quiet timing in the sidebar" not in markdowns(app)  # never offered to a run that had it on
