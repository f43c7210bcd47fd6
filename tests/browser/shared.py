"""One Chromium and one dashboard per environment, shared by the browser files of one unit of work.

The files of a group in tests/conftest.py's SHARED_UNITS form one unit: xdist runs them on one worker, one after
another, so a dashboard they all use starts once and Chromium launches once (each start costs a few seconds of CPU
on 2 cores, beside another worker's browsers). Each test still opens pages of its own (a fresh context: its own
cookies, its own Streamlit session). tests/conftest.py calls `stop()` when the unit ends, so the next file on that
worker can start a Playwright of its own.
"""
from __future__ import annotations

import contextlib

from tests import ROOT
from tests.browser import appdriver

_open = contextlib.ExitStack()  # what stop() closes: the dashboards, the browser, Playwright
_urls: dict[tuple, str] = {}  # the environment a dashboard was started with -> its URL
_browser: list = []  # the one Chromium, once launched


def dashboard(**env: str) -> str:
    """The URL of the dashboard started with `env` (on first use; the tests' own environment under it)."""
    key = tuple(sorted(env.items()))
    if key not in _urls:
        appdriver.need_browser()
        name = "_".join(f"{k.removeprefix('TWO_BENDS_').lower()}-{v}" for k, v in key)
        (ROOT / "artifacts").mkdir(exist_ok=True)
        log = ROOT / "artifacts" / f"streamlit-shared-{name}.log"  # its terminal output, for a failure's reader
        url, _proc = _open.enter_context(appdriver.dashboard(env, log))
        _urls[key] = url
    return _urls[key]


def users_dashboard(model: str) -> str:
    """The dashboard as `bash scripts/dashboard.sh` starts it (for the bundled model): queue mode, the engine in a
    worker process of its own (the suite's other dashboards run it in a thread: tests/conftest.py)."""
    return dashboard(TWO_BENDS_MODEL=model, TWO_BENDS_WORKER="process")


def browser():
    """The unit's Chromium (launched on first use)."""
    if not _browser:
        appdriver.need_browser()
        from playwright.sync_api import sync_playwright

        playwright = _open.enter_context(sync_playwright())
        _browser.append(_open.enter_context(contextlib.closing(appdriver.launch(playwright))))
    return _browser[0]


def stop() -> None:
    """Stop every shared dashboard and the browser (the end of the unit, or of the session)."""
    try:
        _open.close()
    finally:
        _urls.clear()
        _browser.clear()
