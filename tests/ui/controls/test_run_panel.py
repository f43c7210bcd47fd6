"""The run panel sends the browser only what changed (a page waiting in the queue would otherwise redraw twice a second)."""
from ui.controls import run_panel


def test_only_a_changed_value_is_sent_again():
    sent = {"bar": (0.0, "Waiting for the engine…"), "text": ""}
    assert not run_panel._changed(sent, "bar", (0.0, "Waiting for the engine…"))
    assert not run_panel._changed(sent, "text", "")
    assert run_panel._changed(sent, "bar", (0.0, "Waiting in the queue: position 3, about 9 s"))
    assert not run_panel._changed(sent, "bar", (0.0, "Waiting in the queue: position 3, about 9 s"))  # still waiting
    assert run_panel._changed(sent, "bar", (0.0, "Waiting in the queue: position 2, about 6 s"))  # its place moved
    assert run_panel._changed(sent, "text", "The") and run_panel._changed(sent, "text", "The relay")
    assert sent == {"bar": (0.0, "Waiting in the queue: position 2, about 6 s"), "text": "The relay"}


def _live(max_new: int, step_s: float, done: int) -> run_panel.LiveRun:
    from engine.core.trace import DecodeStep
    from engine.serving.scheduling.work import Work

    live = run_panel.LiveRun(Work(), n_prompt=64, max_new_tokens=max_new)
    live.pieces = ["x"] * (done + 1)  # the first token and `done` decoded ones
    live.steps = [DecodeStep(seconds=step_s, kv_length=64 + i, kv_bytes=0) for i in range(done)]
    return live


def test_the_live_chart_is_redrawn_every_few_seconds_but_not_in_the_runs_last_second():
    """Its panel closes when the run ends and the finished run's charts follow at once: a redraw near the end showed
    nothing new and took the cores from the steps being timed."""
    every = run_panel.LIVE_CHART_EVERY_S
    long_run = _live(max_new=512, step_s=0.05, done=40)  # ~23 s left
    assert long_run.seconds_left() > 20
    assert run_panel.chart_due(long_run, every) and not run_panel.chart_due(long_run, every / 2)
    near_end = _live(max_new=32, step_s=0.05, done=20)  # 11 tokens left: ~0.55 s
    assert 0.5 < near_end.seconds_left() < run_panel.LIVE_CHART_MIN_LEFT_S
    assert not run_panel.chart_due(near_end, 10 * every)
    slow = _live(max_new=32, step_s=0.5, done=20)  # the same tokens left on a slow machine: ~5.5 s
    assert run_panel.chart_due(slow, every)
    assert _live(max_new=32, step_s=0.05, done=0).seconds_left() == float("inf")  # no step yet: no pace to judge


def test_a_run_whose_sending_script_was_stopped_is_dropped_not_followed_forever(make_app):
    """The panel sends the request half a second after it is drawn; a click in that half second stops the script run
    before it sent anything. The next script run must not follow a request the engine never got (it would wait for
    its events forever): it drops it and says so."""
    from engine.serving.scheduling.work import Request
    from ui import state

    at = make_app().run()
    store = at.session_state[state.STORE]
    store.live = run_panel.LiveRun(Request(prompt_ids=[1, 2, 3], max_new_tokens=4), 3, 4)  # drawn, never sent
    at.run()
    assert not at.exception
    assert store.live is None
    assert any(run_panel.NOT_SENT in i.value for i in at.info)


def test_a_pressed_run_is_sent_after_its_panel_and_followed_to_its_end(make_app):
    from ui import state

    at = make_app().run()
    at.sidebar.button(key=state.RUN).click().run()
    assert not at.exception
    store = at.session_state[state.STORE]
    assert store.live is None and store.last_trace is not None  # sent, followed, kept
    assert store.last_trace.queue_seconds < run_panel.SETTLE_S / 2  # the half second before sending is not queueing
    assert not any(run_panel.NOT_SENT in i.value for i in at.info)


def test_a_links_run_waits_for_quiet_cores_and_a_pressed_run_waits_the_half_second(make_app, monkeypatch):
    """A link's run=1 starts while the browser is still loading the whole app: its request waits until the cores are
    quiet (at most LINK_SETTLE_MOST_S); a pressed Run, on a page already drawn, waits SETTLE_S only. Each trace says
    how long its request waited after its panel was drawn."""
    from ui import state

    asked = []

    def fake_wait(first_s, most_s):
        asked.append((first_s, most_s))
        return 1.25, True

    monkeypatch.setattr(run_panel, "wait_for_quiet", fake_wait)
    at = make_app(query={"run": "1"}).run()
    assert not at.exception
    store = at.session_state[state.STORE]
    assert asked == [(run_panel.SETTLE_S, run_panel.LINK_SETTLE_MOST_S)]
    assert store.last_trace.settings["sent_after_s"] == 1.25
    at.sidebar.button(key=state.RUN).click().run()
    assert not at.exception and len(asked) == 1  # pressed: the half second, no wait for quiet
    assert store.last_trace.settings["sent_after_s"] == run_panel.SETTLE_S
