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
