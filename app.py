"""Two Bends: the entry point. Routes the pages and draws the shared sidebar (layout only)."""
from ui.controls import launch

launch.wait_for_app_modules()  # the launcher imports the modules below while the browser loads the page
import streamlit as st  # noqa: E402

from ui.controls import demo_panel, lesson_panel, presenter, run_panel, tab_watch, widgets  # noqa: E402
from ui.demo import recorded  # noqa: E402
from ui.room import code_display, follow, gate  # noqa: E402

st.set_page_config(page_title="Two Bends — prefill and decode", page_icon=":material/landscape:", layout="wide")
role = gate.admit()  # room mode: nothing below runs until this session entered the join code

PAGES = {
    "The story": [
        st.Page("pages/story/home.py", title="Home — two bends", icon=":material/landscape:", default=True),
        st.Page("pages/story/prefill.py", title="Prefill — the valley", icon=":material/grid_on:"),
        st.Page("pages/story/decode.py", title="Decode — the bridge", icon=":material/linear_scale:"),
        st.Page("pages/story/timing.py", title="Timing — the ledger", icon=":material/timer:"),
    ],
    "Labs": [
        st.Page("pages/labs/lab_sweeps.py", title="Sweep lab", icon=":material/show_chart:"),
        st.Page("pages/labs/lab_batch.py", title="Batch lab", icon=":material/stacks:"),
        st.Page("pages/labs/lab_roofline.py", title="Roofline & hardware", icon=":material/terrain:"),
        st.Page("pages/labs/lab_remedies.py", title="Remedies lab", icon=":material/build:"),
        st.Page("pages/labs/lab_budget.py", title="Old Qin's budget", icon=":material/savings:"),
        st.Page("pages/labs/lab_fleet.py", title="Fleet planner", icon=":material/hub:"),
        st.Page("pages/labs/lab_profile.py", title="Where the time goes", icon=":material/biotech:"),
        st.Page("pages/labs/lab_traffic.py", title="Traffic lab", icon=":material/traffic:"),
    ],
    "Beyond one machine": [
        st.Page("pages/serving/measure_server.py", title="Measure a server", icon=":material/dns:", url_path="measure"),
    ],
    "The room": [
        st.Page("pages/room/poll.py", title="Predict, then measure", icon=":material/how_to_vote:", url_path="poll"),
        st.Page("pages/room/teacher_console.py", title="Teacher console", icon=":material/school:", url_path="console"),
    ],
}

EVERY_PAGE = [p for group in PAGES.values() for p in group]  # a lesson may name any page; some are not this session's
if role in ("solo", "student"):  # the console is the teacher's (solo: predict, then measure alone)
    PAGES["The room"] = PAGES["The room"][:1]
if recorded.replay_only():
    PAGES.pop("Labs")  # labs measure live on this machine: replay-only mode has no model to measure with
page = st.navigation(PAGES)
shown = [p for group in PAGES.values() for p in group]  # this session's pages
gate.land(page, shown)  # room mode: a deep link opened before the code, once
gate.remember()  # room mode: this browser stays signed in (a cookie) across reloads, links and the server's restart
follow.presence(page, shown)  # room mode: page, locks, follow-me, notices
lessons, _ = lesson_panel.lessons(EVERY_PAGE)  # assets/lessons/: ordered steps, each a page and a link's settings
demo_panel.restore(page, shown, lessons)  # a shared link's settings, once
lesson_panel.route(page, shown)  # a lesson's Back / Next: the step's page
request = widgets.sidebar()
tab_watch.install()  # a tab whose page went blank (Streamlit's frontend crashed) reloads itself
presenter.apply(PAGES, request)  # presenter mode: its own bar (every page, Run, lengths, glossary)
lesson_step = lesson_panel.bar(EVERY_PAGE)  # lesson mode: the step, Back / Next (PageUp / PageDown), the notes
code_display.presenter_banner()  # room mode, presenter mode, the teacher: the join code and QR code, large
run_panel.run_panel(request)  # runs the model when Run was pressed, live, above any page
lesson_panel.check(lesson_step)  # did the step's run produce the lengths it asked for
demo_panel.publish(page)  # the current settings into the URL, for sharing
with follow.drawing():  # room mode: a follow-me push counts as seen once its page is drawn
    page.run()
