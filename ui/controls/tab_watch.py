"""A tab whose page went blank reloads itself: Streamlit 1.67's frontend can throw "Bad delta path index" while it
applies a rerun next to a fragment's timer run on a loaded machine; React's tree is then gone (no app root left) and
only a reload brings the page back. A small script, installed once per tab, looks every 2 s: an app root seen before
and gone now means the tab crashed, and it reloads, as a student would press F5 (in a room, the browser's sign-in
cookie lets it back in without the code). At most 3 reloads a minute per tab, so a page that cannot draw does not
reload forever. Streamlit cannot do this from the server: the socket of a crashed tab is closed.
"""
from __future__ import annotations

import streamlit as st

KEY = "tab_watch"  # the container of the script
EVERY_MS, MOST_PER_MINUTE = 2000, 3
SCRIPT = ("""
<script>
(() => {
  if (window.__twoBendsTabWatch) return;  // one watch per tab, installed by the first page drawn
  window.__twoBendsTabWatch = true;
  let seen = !!document.querySelector("[data-testid='stApp']");  // drawn before the watch loaded: seen
  setInterval(() => {
    const root = document.querySelector("[data-testid='stApp']");
    if (root) { seen = true; return; }
    if (!seen) return;
    const now = Date.now();
    const recent = JSON.parse(sessionStorage.getItem("twoBendsReloads") || "[]").filter(t => now - t < 60000);
    if (recent.length >= %(most)d) return;
    sessionStorage.setItem("twoBendsReloads", JSON.stringify([...recent, now]));
    location.reload();
  }, %(every)d);
})();
</script>
""".replace("%(most)d", str(MOST_PER_MINUTE)).replace("%(every)d", str(EVERY_MS)))


def install() -> None:
    """The watch's script, in a 1-pixel sidebar container (drawn on every run; the script installs itself once)."""
    with st.sidebar, st.container(key=KEY, height=1, border=False):
        st.html(SCRIPT, unsafe_allow_javascript=True)
