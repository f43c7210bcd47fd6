"""follow.drawing(): a follow-me push counts as seen only when its page's run ends whole (its end or its own
st.stop()), never when another rerun cuts the run short (the student's next look then draws the page again)."""
import pytest
from streamlit.runtime.scriptrunner_utils.exceptions import RerunException, StopException

from ui.room import current, follow


@pytest.fixture
def student(monkeypatch):
    monkeypatch.setattr(current, "role", lambda: "student")
    monkeypatch.setattr(current, "session_id", lambda: "sid-drawing")
    yield "sid-drawing"
    for store in (follow._DRAWING, follow._DRAWN):
        store.pop("sid-drawing", None)


def test_a_run_cut_short_by_a_rerun_leaves_the_push_unseen(student):
    follow._DRAWING[student] = 3
    with pytest.raises(RerunException), follow.drawing():
        raise RerunException(None)
    assert student not in follow._DRAWN and student not in follow._DRAWING


@pytest.mark.parametrize("ending", ["st.stop()", "its end"])
def test_a_run_that_ends_whole_marks_the_push_drawn(student, ending):
    follow._DRAWING[student] = 4
    if ending == "st.stop()":
        with pytest.raises(StopException), follow.drawing():
            raise StopException()
    else:
        with follow.drawing():
            pass
    assert follow._DRAWN[student] == 4 and student not in follow._DRAWING
