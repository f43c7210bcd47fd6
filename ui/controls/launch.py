"""Start the dashboard: `streamlit run app.py`, with Streamlit's old pages/-folder mode off from the very first request.

Why not plain `streamlit run app.py`: with a `pages/` folder beside it, Streamlit 1.67 starts in its old multipage
mode, which finds none of our pages (they sit in subfolders), so a server's first visitor arriving by a path-style
link (`/timing`) got "Page not found" before app.py's st.navigation switched that mode off. Here it is off before
any request.
In room mode (TWO_BENDS_ROOM=1) it also fixes the join and teacher codes before any session reads them and prints
them with the room's address and its QR code.
Before importing anything heavy it spawns the engine worker (engine/serving/scheduling/early_start.py), so its torch
import and model load overlap Streamlit's start (docs/decisions/fast-start.md); not in replay mode nor with
TWO_BENDS_WORKER=thread. App modules are imported while the browser loads the page, then frozen out of the garbage
collector (docs/decisions/gc-freeze.md).
Usage: python -m ui.controls.launch [streamlit options, e.g. --server.port 8501]
"""
import gc
import importlib
import os
import socket
import sys
import threading
import time
from pathlib import Path

from engine.serving.scheduling import early_start  # standard library only: imported before anything heavy

APP = Path(__file__).resolve().parents[2] / "app.py"
# what app.py imports (a test keeps this so)
APP_MODULES = ("ui.controls.demo_panel", "ui.controls.lesson_panel", "ui.controls.presenter", "ui.controls.run_panel",
               "ui.controls.tab_watch", "ui.controls.widgets", "ui.demo.recorded", "ui.room.code_display",
               "ui.room.follow", "ui.room.gate")

TOKENIZER_MODULE = "engine.loading.tokenizer_file"  # the class of a converted model's tokenizer (`tokenizers`, no transformers)


def import_app_modules_soon(wait_s: float = 60.0) -> threading.Thread:
    """In a thread: once Streamlit's runtime exists (so st.cache_* find it), import app.py's modules (no torch: the
    engine runs in the worker) while the browser loads the page; the first script run then finds them in sys.modules.
    Then the tokenizer's class, which reading the worker's model description needs (its Rust library, ~0.1 s; a model
    loaded by Hugging Face id brings transformers' class, imported then), while the worker still loads the weights.
    Then freeze what exists (gc.freeze): the imports' objects live as long as the server, and every full collection
    (Python's own, and one Streamlit would run after each script run) would otherwise walk all of them, holding the
    GIL."""
    def run() -> None:
        from streamlit.runtime import Runtime

        end = time.monotonic() + wait_s
        while not Runtime.exists() and time.monotonic() < end:
            time.sleep(0.02)
        for name in APP_MODULES:
            try:
                importlib.import_module(name)
            except Exception:  # the script run imports it again and shows the error where it belongs
                return
        try:
            importlib.import_module(TOKENIZER_MODULE)
            importlib.import_module("tokenizers")
            read_default_tokenizer()
        except Exception:  # the description's unpickling imports and reads what it needs
            pass
        gc.freeze()

    global _preimport
    _preimport = threading.Thread(target=run, name="two-bends-preimport", daemon=True)
    _preimport.start()
    return _preimport


_preimport: threading.Thread | None = None


def read_default_tokenizer() -> None:
    """The bundled model's tokenizer read now (where the worker preloads it and its cache is converted), so the worker's
    model description, which names the tokenizer's folder rather than carrying it, finds it already read."""
    from engine.loading import model_store, tokenizer_file

    name = early_start.options_from_env().preload.name.strip().lower()  # the model the early worker loads
    if model_store.ALIASES.get(name) == model_store.BUNDLED and model_store.bundled_converted():
        tokenizer_file.read_cached(str(model_store.bundled_folder()))


def wait_for_app_modules(timeout: float = 120.0) -> None:
    """app.py's first line: let the launcher's import thread finish first (two threads importing the same modules
    could meet in a circular import); at once when the app was not started by this launcher (tests, streamlit run)."""
    if _preimport is not None:
        _preimport.join(timeout)


def engine_worker_wanted(env=os.environ) -> bool:
    """Whether this dashboard will run an engine worker process (so it is worth spawning one right away)."""
    return env.get("TWO_BENDS_REPLAY") != "1" and env.get("TWO_BENDS_WORKER", "process") == "process"


def main() -> None:
    if engine_worker_wanted():
        early_start.start_early()  # first: its imports and model load overlap everything below
    from streamlit.runtime.pages_manager import PagesManager
    from streamlit.web import cli

    from ui.room import config

    import_app_modules_soon()
    if not hasattr(PagesManager, "uses_pages_directory"):  # a Streamlit that renamed it: fail loudly, not silently
        raise SystemExit("this Streamlit has no PagesManager.uses_pages_directory; see ui/controls/launch.py")
    PagesManager.uses_pages_directory = False  # app.py routes every page itself (st.navigation)
    if os.environ.get(config.ENV_ROOM) == "1":  # room mode: both codes fixed before any session reads them
        from ui.room import opening  # the room's file read or made, the codes printed with the URL and its QR code

        opening.open_room(room_url(sys.argv[1:]))
    sys.argv = ["streamlit", "run", str(APP), *sys.argv[1:]]
    sys.exit(cli.main())


def _option(args: list[str], name: str) -> str | None:
    """The value of a Streamlit option given as `--name value` or `--name=value` (the last one wins)."""
    value = None
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith(name + "="):
            value = arg.split("=", 1)[1]
    return value


def lan_address() -> str:
    """This machine's address on its network, as another device would type it (no packet is sent: a UDP socket
    only picks the route); 127.0.0.1 when the machine has no network."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))
            return s.getsockname()[0]
        except OSError:
            return "127.0.0.1"


def room_url(args: list[str]) -> str:
    address = _option(args, "--server.address") or "0.0.0.0"
    host = lan_address() if address in ("0.0.0.0", "::", "") else address
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{_option(args, '--server.port') or 8501}"


if __name__ == "__main__":  # run under its import name, so app.py's `launch` is this same module and its thread
    importlib.import_module("ui.controls.launch").main()
