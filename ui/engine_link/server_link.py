"""What the whole dashboard server shares: one engine worker, every session's run store, and the janitor that sweeps them.

One ServerLink per Streamlit server (ui/engine_link/worker_link.py caches it with st.cache_resource): it starts the
engine worker with the settings `two-bends dashboard` put in the environment, registers each session's RunStore,
and every JANITOR_EVERY_S seconds cancels what closed tabs were still waiting for (after GRACE_S, so a reconnect
keeps its work): in a room that frees their slots too (ui/room/slots.py).
"""
from __future__ import annotations

import os
import threading
import time

from streamlit.runtime import Runtime

from engine.serving.scheduling import early_start
from engine.serving.scheduling.work import ModelSpec
from engine.serving.scheduling.worker import ServiceOptions, make_service
from ui.engine_link.run_store import RunStore

JANITOR_EVERY_S = 2.0  # how often closed sessions are looked for
GRACE_S = 4.0  # a session must stay gone this long before its work is cancelled (a reconnect keeps it)


def options() -> ServiceOptions:
    """The engine worker's settings from the environment `two-bends dashboard` set (read in one place, for the early worker
    too: engine/serving/scheduling/early_start.py)."""
    return early_start.options_from_env(os.environ, prepack_in_background=False)


class ServerLink:
    """The worker plus the registry of sessions' stores (for the janitor)."""

    def __init__(self):
        self.options = options()
        self.service = make_service(self.options, os.environ.get("TWO_BENDS_WORKER", "process"))
        self.stores: dict[str, RunStore] = {}
        self.models: dict[ModelSpec, object] = {}  # ModelInfo by spec, as the worker described them
        self.gone_since: dict[str, float] = {}
        self.lock = threading.Lock()
        threading.Thread(target=self._janitor, name="two-bends-janitor", daemon=True).start()

    def _janitor(self) -> None:
        while True:
            time.sleep(JANITOR_EVERY_S)
            if Runtime.exists():
                self.sweep(Runtime.instance().is_active_session, time.monotonic())

    def sweep(self, is_active, now: float) -> list[str]:
        """Cancel what closed tabs were waiting for (their browser's finished runs stay:
        see browser_runs); a tab must stay gone GRACE_S first (a reconnect keeps it). Returns the sessions let go."""
        closed = []
        with self.lock:
            for sid, store in list(self.stores.items()):
                if is_active(sid):
                    self.gone_since.pop(sid, None)
                    continue
                since = self.gone_since.setdefault(sid, now)
                if now - since >= GRACE_S:
                    for work in store.in_flight():  # a closed tab frees the engine's time (and its room slot)
                        self.service.cancel(work)
                    store.forget_work()
                    del self.stores[sid], self.gone_since[sid]
                    closed.append(sid)
        return closed
