"""Start the dashboard: `streamlit run app.py`, with Streamlit's old pages/-folder mode off from the very first request.

Why not plain `streamlit run app.py`: a `pages/` folder next to the main script makes Streamlit 1.67 start each
server in its old multipage mode, which looks only at files directly inside pages/ (ours sit in subfolders by
role, so it finds none). The very first request then asks that old mode for the linked page (`/timing`), it is not
there, and the browser gets Streamlit's "Page not found" notice before app.py's st.navigation takes over and
draws the right page. st.navigation switches the old mode off for the whole process, so only a server's first
visitor arriving by a path-style link saw it; here it is off before any request. `?page=timing` links never
went through that path.
Usage: python -m ui.controls.launch [streamlit options, e.g. --server.port 8501]
"""
import os
import sys
from pathlib import Path

from streamlit.runtime.pages_manager import PagesManager
from streamlit.web import cli

from ui.room import config

APP = Path(__file__).resolve().parents[2] / "app.py"


def main() -> None:
    if not hasattr(PagesManager, "uses_pages_directory"):  # a Streamlit that renamed it: fail loudly, not silently
        raise SystemExit("this Streamlit has no PagesManager.uses_pages_directory; see ui/controls/launch.py")
    PagesManager.uses_pages_directory = False  # app.py routes every page itself (st.navigation)
    if os.environ.get(config.ENV_ROOM) == "1":  # room mode: both codes fixed before any session reads them
        for name in (config.ENV_JOIN, config.ENV_TEACHER):
            os.environ[name] = config.normalise(os.environ.get(name, "")) or config.new_code()
        print(f"[room] join code for students: {os.environ[config.ENV_JOIN]}   teacher code: "
              f"{os.environ[config.ENV_TEACHER]}", flush=True)
    sys.argv = ["streamlit", "run", str(APP), *sys.argv[1:]]
    sys.exit(cli.main())


if __name__ == "__main__":
    main()
