"""Two Bends: the entry point. Routes the pages and draws the shared sidebar (layout only)."""
import streamlit as st

from ui import demo_panel, presenter, recorded, widgets

st.set_page_config(page_title="Two Bends — prefill and decode", page_icon=":material/landscape:", layout="wide")

PAGES = {
    "The story": [
        st.Page("app_pages/home.py", title="Home — two bends", icon=":material/landscape:", default=True),
        st.Page("app_pages/prefill.py", title="Prefill — the valley", icon=":material/grid_on:"),
        st.Page("app_pages/decode.py", title="Decode — the bridge", icon=":material/linear_scale:"),
        st.Page("app_pages/timing.py", title="Timing — the ledger", icon=":material/timer:"),
    ],
    "Labs": [
        st.Page("app_pages/lab_sweeps.py", title="Sweep lab", icon=":material/show_chart:"),
        st.Page("app_pages/lab_batch.py", title="Batch lab", icon=":material/stacks:"),
        st.Page("app_pages/lab_roofline.py", title="Roofline & hardware", icon=":material/terrain:"),
        st.Page("app_pages/lab_remedies.py", title="Remedies lab", icon=":material/build:"),
        st.Page("app_pages/lab_budget.py", title="Old Qin's budget", icon=":material/savings:"),
        st.Page("app_pages/lab_profile.py", title="Where the time goes", icon=":material/biotech:"),
    ],
    "Beyond one machine": [
        st.Page("app_pages/measure.py", title="Measure a server", icon=":material/dns:"),
    ],
}

if recorded.replay_only():
    PAGES.pop("Labs")  # labs measure live on this machine: replay-only mode has no model to measure with
page = st.navigation(PAGES)
demo_panel.restore(page, [p for group in PAGES.values() for p in group])  # a shared link's settings, once
request = widgets.sidebar()
presenter.apply(PAGES["The story"])
widgets.run_panel(request)  # runs the model when Run was pressed, live, above any page
demo_panel.publish(page)  # the current settings into the URL, for sharing
page.run()
