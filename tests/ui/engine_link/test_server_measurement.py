"""ui/engine_link/server_measurement.py's child process: both of its pipes are read while it runs, so a chatty stderr
never blocks it (a pipe holds 64 KB; the child would wait for the reader until the time limit killed it)."""
import sys

import pytest

from engine.errors import EngineError
from ui.engine_link.server_measurement import run_measurement

LIMIT_S = 20.0  # far more than the child needs; the old deadlock lasted until this limit


def child(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_a_child_that_writes_lots_to_stderr_first_still_delivers_its_records():
    code = ("import sys\n"
            "sys.stderr.write('warning: chatty library\\n' * 20000)\n"  # ~480 KB, far over a pipe's 64 KB
            "sys.stderr.flush()\n"
            "print('{\"request\": 1}', flush=True)\n")
    seen = []
    records = run_measurement(child(code), on_record=seen.append, limit_s=LIMIT_S)
    assert records == [{"request": 1}] and seen == records


def test_the_last_stderr_line_is_the_error_even_after_much_output():
    code = ("import sys\n"
            "sys.stderr.write('noise\\n' * 30000)\n"
            "sys.stderr.write('error: the server answered HTTP 404\\n')\n"
            "sys.exit(2)\n")
    with pytest.raises(EngineError, match=r"^the server answered HTTP 404$"):
        run_measurement(child(code), limit_s=LIMIT_S)
