"""The room opened at the server's start, before Streamlit: its file read (or made), its codes fixed and printed.

Streamlit-free; ui/controls/launch.py calls `open_room` in room mode. The room's file lives in the data folder
(--data-dir, else the user's data folder: ui/room/store.py's default_dir). The same command after a restart finds
the same room: the same join code and QR code (a new one only with --new-code, a given --code, or *Clear the room*),
the teacher code unchanged (the file keeps only its hash, so it is not printed again; --teacher-code sets a new one).
The codes travel to every session in the environment (ui/room/config.py): the join code, and the teacher code's hash.
"""
from __future__ import annotations

import os

from ui.room import config, qr, signing, store
from ui.room.keeper import Keeper

ENV_PROBLEM = "TWO_BENDS_ROOM_PROBLEM"  # the line the launcher printed when the room is not saved (said once)


def open_room(url: str, env=None, say=None) -> None:
    """Fix both codes (a chosen one checked, the saved room's kept, a missing one made), write them to the room's
    file and the environment, and print them with the URL and its QR code. SystemExit (one line) for a bad code."""
    env = os.environ if env is None else env
    say = say or (lambda line: print(line, flush=True))
    given_join, given_teacher = config.normalise(env.get(config.ENV_JOIN, "")), env.get(config.ENV_TEACHER, "")
    for given, what in ((given_join, "join code"), (given_teacher, "teacher code")):
        if given.strip() and (problem := config.problem(given, what)):
            raise SystemExit(f"error: {problem}")
    env[config.ENV_DATA_DIR] = data_dir = env.get(config.ENV_DATA_DIR) or str(store.default_dir(env))
    keeper = Keeper(data_dir, say=say)
    try:
        saved = keeper.saved_room()
        fresh = env.get(config.ENV_NEW_CODE) == "1"
        join = given_join or (saved.join_code if saved is not None and not fresh else config.new_code(6))
        if given_teacher.strip():  # the same code as the saved one keeps its hash: teachers stay signed in
            same = saved is not None and signing.code_matches(given_teacher, saved.teacher_hash)
            teacher_hash, made = saved.teacher_hash if same else signing.hash_code(given_teacher), None
            teacher_line = f"teacher code (as given): {config.display(config.normalise(given_teacher))}"
        elif saved is not None and saved.teacher_hash:
            teacher_hash, made = saved.teacher_hash, None
            teacher_line = ("teacher code: unchanged (the room's file keeps only its hash, so it is not shown again; "
                            "--teacher-code CODE sets a new one; a browser signed in as teacher stays so)")
        else:
            made = config.new_code(8)
            teacher_hash = signing.hash_code(made)
            teacher_line = f"teacher code (opens the teacher console; keep it off the projector): {config.display(made)}"
        if signing.code_matches(join, teacher_hash):
            raise SystemExit("error: the join code and the teacher code must differ (students would get the console)")
        secret = saved.secret if saved is not None else signing.new_secret()
        keeper.write_room(join, teacher_hash, secret, saved.settings if saved is not None else {})
        if saved is not None:
            keeper.count_start()
        env[config.ENV_JOIN], env[config.ENV_TEACHER_HASH] = join, teacher_hash
        env.pop(config.ENV_TEACHER, None)  # the sessions compare with the hash; the code itself goes no further
        env[config.ENV_URL] = url = env.get(config.ENV_URL) or url
        if keeper.problem:
            env[ENV_PROBLEM] = keeper.problem
        kept = saved is not None and join == saved.join_code and keeper.saving
        say(f"\n[room] {teacher_line}")
        say(f"[room] students open {url} (or scan the code) and type the join code {config.display(join)}"
            + (" (the same as before the restart)" if kept else "") + f"\n{qr.terminal(url)}")
        if keeper.saving:
            say(f"[room] saved in {keeper.path} (readable by you only): members, poll rounds with every answer, runs. "
                "The same command after a restart brings the room back; --new-code gives it a new join code; "
                "'Clear the room' on the teacher console deletes it.")
    finally:
        keeper.close()
