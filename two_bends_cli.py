"""`two-bends`: the project's one command. `two-bends dashboard` serves the teaching dashboard; every other command is
the engine's own (`two-bends serve ...` is exactly `python -m engine serve ...`: generate, serve, measure, bench, show,
prepare, and whatever engine/cli.py adds). Installed by scripts/setup.sh (`pip install -e .`, pyproject.toml's
[project.scripts]); `python -m two_bends_cli` from the checkout does the same without the install.

`dashboard` takes the options scripts/dashboard.sh passes on (that script sets up, then runs this command):
each sets the environment variable the dashboard's engine worker reads (engine/serving/scheduling/early_start.py), the first
option it does not know and everything after it go to Streamlit unchanged. It binds 127.0.0.1 unless told otherwise,
converts the bundled model once (`engine prepare`), then replaces itself with the launcher, ui/controls/launch.py.
"""
from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent  # the checkout: app.py and .streamlit/config.toml (Streamlit reads it from the cwd)

DASHBOARD_HELP = """usage: two-bends dashboard [OPTIONS] [STREAMLIT OPTIONS, e.g. --server.port 8501]

Serve the Two Bends dashboard (Streamlit on app.py) on http://127.0.0.1:8501, to this machine only.

  --mode queue|batch             queue (default): one request at a time, first come first served;
                                 batch: continuous batching
  --max-num-batched-tokens N     batch mode: tokens per engine step (vLLM's name): chunked prefill
  --max-queue N                  waiting requests before new ones are refused
  --max-new-tokens N             most new tokens one request may ask for
  --max-batch N                  sequences sharing a decode step in batch mode
  --model-threads N              torch threads for the model (default 0: every core; cores - 1 leaves a core
                                 to a browser on the same machine)
  --fixed-threads                every decode step on --model-threads threads (default: fewer while other
                                 programs hold cores, chosen by measurement)
  --replay                       recorded runs only (assets/traces/, uploaded Trace files): no model is loaded
  --room [--code CODE] [--teacher-code CODE] [--data-dir DIR] [--new-code]
                                 a workshop: binds every interface (0.0.0.0), nothing opens without the join
                                 code (generated, or CODE: 4 to 64 letters or digits); the teacher code opens
                                 the teacher console. The room is saved in DIR (default: your data folder,
                                 e.g. ~/.local/share/two-bends): the same command after a restart brings back
                                 the same code, members, poll rounds, answers and runs; --new-code gives the
                                 saved room a new join code
  --measure-hosts HOST[:PORT],...  the servers the "Measure a server" page may measure (off when not given)
  --engine-url URL               every Run goes to that OpenAI-compatible server (its host must be on
                                 --measure-hosts); the local engine stays for the attention and KV views
  --dry-run                      print the Streamlit command and stop (no model, nothing started)
  -h, --help                     this text

An explicit --server.address ADDR (after the options above) is kept; --room and --server.address together are refused.
Guide: docs/teacher-guide.md."""

# option -> the environment variable the dashboard reads (ui/engine_link/server_link.py, ui/room/config.py)
VALUED = {"--mode": "TWO_BENDS_MODE", "--max-queue": "TWO_BENDS_MAX_QUEUE", "--max-new-tokens": "TWO_BENDS_MAX_NEW_TOKENS",
          "--max-batch": "TWO_BENDS_MAX_BATCH", "--max-num-batched-tokens": "TWO_BENDS_MAX_NUM_BATCHED_TOKENS",
          "--model-threads": "TWO_BENDS_THREADS", "--code": "TWO_BENDS_JOIN_CODE",
          "--teacher-code": "TWO_BENDS_TEACHER_CODE", "--measure-hosts": "TWO_BENDS_MEASURE_HOSTS",
          "--engine-url": "TWO_BENDS_ENGINE_URL", "--data-dir": "TWO_BENDS_DATA_DIR"}
SWITCHES = {"--fixed-threads": "TWO_BENDS_FIXED_THREADS", "--replay": "TWO_BENDS_REPLAY", "--room": "TWO_BENDS_ROOM",
            "--new-code": "TWO_BENDS_NEW_CODE"}
MODES = ("queue", "batch")  # disaggregated serving: `two-bends serve --mode disaggregated`


class Refused(Exception):
    """A dashboard option refused in one line (exit status 2), before anything starts."""


def parse_dashboard(args: list[str], env: dict) -> tuple[list[str], bool]:
    """Set `env` from the dashboard's own options; return (Streamlit's options, dry run). Stops at the first option it
    does not know: that one and the rest are Streamlit's, but for --dry-run, which counts wherever it stands."""
    dry_run = "--dry-run" in args
    args, i = [a for a in args if a != "--dry-run"], 0
    while i < len(args):
        arg = args[i]
        if arg in VALUED:
            env[VALUED[arg]] = args[i + 1] if i + 1 < len(args) else ""
            i += 2
        elif arg in SWITCHES:
            env[SWITCHES[arg]] = "1"
            i += 1
        else:
            break
    return args[i:], dry_run


def check_settings(env: dict) -> None:
    threads = env.get("TWO_BENDS_THREADS", "0")
    if not threads.isdigit():
        raise Refused(f"--model-threads must be a whole number, 0 = every core (got '{threads}')")
    budget = env.get("TWO_BENDS_MAX_NUM_BATCHED_TOKENS", "")
    if budget and not budget.isdigit():
        raise Refused(f"--max-num-batched-tokens must be a whole number of tokens (got '{budget}')")
    mode = env.get("TWO_BENDS_MODE", "queue")
    if mode not in MODES:
        raise Refused(f"--mode must be queue or batch (got '{mode}')")


def bind_address(env: dict, streamlit_args: list[str]) -> str | None:
    """The address to bind: 127.0.0.1 (this machine only; Streamlit alone binds every interface), 0.0.0.0 for a
    room, None when the Streamlit options name one themselves."""
    explicit = any(a == "--server.address" or a.startswith("--server.address=") for a in streamlit_args)
    if env.get("TWO_BENDS_ROOM") != "1":
        if env.get("TWO_BENDS_JOIN_CODE") or env.get("TWO_BENDS_TEACHER_CODE"):
            raise Refused("--code and --teacher-code are for a room: add --room")
        if env.get("TWO_BENDS_DATA_DIR") or env.get("TWO_BENDS_NEW_CODE"):
            raise Refused("--data-dir and --new-code are for a room (where it is saved, its new code): add --room")
        return None if explicit else "127.0.0.1"
    if explicit:
        raise Refused("give --room or --server.address, not both")
    if env.get("TWO_BENDS_NEW_CODE") == "1" and env.get("TWO_BENDS_JOIN_CODE"):
        raise Refused("give --code or --new-code, not both (--code sets the new code itself)")
    if env.get("TWO_BENDS_DATA_DIR"):  # absolute: the launcher runs from the checkout, not from here
        env["TWO_BENDS_DATA_DIR"] = str(Path(env["TWO_BENDS_DATA_DIR"]).expanduser().resolve())
    for flag, name in (("--code", "TWO_BENDS_JOIN_CODE"), ("--teacher-code", "TWO_BENDS_TEACHER_CODE")):
        code = env.get(name, "")
        bare = "".join(ch for ch in code if ch not in " \t-")  # as ui/room/config.py reads it
        if code and not 4 <= len(bare) <= 64:
            raise Refused(f"{flag} needs 4 to 64 letters or digits (got {len(bare)})")
    return "0.0.0.0"


def checked_engine_url(env: dict) -> str | None:
    """The room's serving engine, checked against the operator's allow-list by the dashboard's own rule
    (ui/engine_link/remote_measure.py); its one-line refusal goes to stderr."""
    if not env.get("TWO_BENDS_ENGINE_URL"):
        return None
    done = subprocess.run([sys.executable, "-m", "ui.engine_link.remote_measure", "--check", f"--url={env['TWO_BENDS_ENGINE_URL']}"],
                          cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise Refused("")  # the check printed why
    return done.stdout.strip()


def dashboard(args: list[str]) -> int:
    if args[:1] in (["-h"], ["--help"]):
        print(DASHBOARD_HELP)
        return 0
    env = dict(os.environ)
    streamlit_args, dry_run = parse_dashboard(args, env)
    try:
        check_settings(env)
        address = bind_address(env, streamlit_args)
        if address == "0.0.0.0":
            print("[dashboard] --room: listening on every network interface (0.0.0.0); every page needs the room's join "
                  "code (printed below with the URL and QR code when the server starts).", file=sys.stderr)
        cmd = [sys.executable, "-m", "ui.controls.launch", "--browser.gatherUsageStats", "false"]
        cmd += ["--server.address", address] if address else []
        cmd += streamlit_args
        if dry_run and env.get("TWO_BENDS_ROOM") == "1":
            print("TWO_BENDS_ROOM=1")
        if url := checked_engine_url(env):
            print(f"[dashboard] every Run goes to the serving engine at {url} (timed from outside, as engine measure does)")
        if dry_run:
            print(" ".join(cmd))
            return 0
    except Refused as why:
        if str(why):
            print(f"error: {why}", file=sys.stderr)
        return 2
    if env.get("TWO_BENDS_REPLAY") == "1":
        print("[dashboard] replay mode: recorded runs only, no model is loaded", flush=True)
    else:
        print("[dashboard] preparing the bundled SmolLM2 model (first time: about a minute)", flush=True)
        from engine.cli import main as engine_main  # a converted model: no torch imported, well under a second

        if engine_main(["prepare"]) != 0:
            return 2
        budget = env.get("TWO_BENDS_MAX_NUM_BATCHED_TOKENS")
        print(f"[dashboard] scheduling mode: {env.get('TWO_BENDS_MODE', 'queue')}"
              + (f", chunked prefill: {budget} tokens a step" if budget else ""))
        if env.get("TWO_BENDS_MEASURE_HOSTS"):
            print(f"[dashboard] the Measure a server page may measure: {env['TWO_BENDS_MEASURE_HOSTS']}")
    sys.stdout.flush()
    os.chdir(ROOT)
    os.execve(cmd[0], cmd, env)  # the launcher takes this process over, as a shell's `exec` does


def engine_commands() -> str:
    """The command list of `python -m engine --help`, as the engine's parser writes it (so commands added there are
    listed here too): the lines under its `{generate,show,...}` line, or all of it."""
    from engine.cli import main as engine_main

    text = io.StringIO()
    with contextlib.redirect_stdout(text), contextlib.suppress(SystemExit):
        engine_main(["--help"])
    help_text = text.getvalue()
    lines = help_text.splitlines()
    start = next((i + 1 for i, line in enumerate(lines) if line.strip().startswith("{")), None)
    if start is None:
        return help_text
    end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    return "\n".join(lines[start:end])


def usage() -> str:
    return ("usage: two-bends COMMAND [OPTIONS]   (two-bends COMMAND --help: its options)\n\n"
            "Two Bends: prefill and decode, seen and measured.\n\n"
            "    dashboard           serve the teaching dashboard in the browser\n\n"
            "Every other COMMAND is the engine's, exactly `python -m engine COMMAND`:\n"
            + engine_commands() + "\n")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        if not args or args[0] in ("-h", "--help"):
            print(usage())
            return 0 if args else 2
        if args[0] == "dashboard":
            return dashboard(args[1:])
        from engine.cli import main as engine_main

        return engine_main(args)
    except BrokenPipeError:  # `two-bends show FILE | head`: the reader left; say nothing more (no traceback)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
