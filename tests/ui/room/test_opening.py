"""Opening the room at the server's start (ui/room/opening.py, what the launcher runs before Streamlit) and the
dashboard's room options (two_bends_cli.py): the same command after a restart brings back the same join code, the
teacher code is never written down (only its hash travels), --new-code and --code change the join code, and a room
file that cannot be used is one line while the room still opens, in memory."""
import pytest

import two_bends_cli
from ui.room import config, opening, signing
from ui.room.store import FILE_NAME, RoomStore

URL = "http://10.0.0.5:8501"


def start(tmp_path, **given) -> tuple[dict, list[str]]:
    """One server start: the launcher's environment after it opened the room, and what it printed."""
    env = {config.ENV_ROOM: "1", config.ENV_DATA_DIR: str(tmp_path), **given}
    lines: list[str] = []
    opening.open_room(URL, env, say=lines.append)
    return env, lines


def test_the_same_command_after_a_restart_brings_back_the_same_codes(tmp_path):
    first, printed = start(tmp_path)
    join = first[config.ENV_JOIN]
    teacher = next(line for line in printed if "teacher code" in line).rsplit(": ", 1)[1]
    assert config.ENV_TEACHER not in first and signing.code_matches(teacher, first[config.ENV_TEACHER_HASH])
    assert teacher.replace("-", "") not in (tmp_path / FILE_NAME).read_bytes().decode("latin-1")  # only its hash
    again, printed = start(tmp_path)
    assert again[config.ENV_JOIN] == join and again[config.ENV_TEACHER_HASH] == first[config.ENV_TEACHER_HASH]
    assert any("the same as before the restart" in line and config.display(join) in line for line in printed)
    assert any("teacher code: unchanged" in line for line in printed)
    assert not any(teacher in line for line in printed)  # a kept teacher code is never printed again
    assert RoomStore(tmp_path / FILE_NAME).room().starts == 2


def test_new_code_or_a_given_code_changes_only_the_join_code(tmp_path):
    first, _ = start(tmp_path)
    fresh, _ = start(tmp_path, **{config.ENV_NEW_CODE: "1"})
    assert fresh[config.ENV_JOIN] != first[config.ENV_JOIN]
    assert fresh[config.ENV_TEACHER_HASH] == first[config.ENV_TEACHER_HASH]
    given, printed = start(tmp_path, **{config.ENV_JOIN: "bri-dge", config.ENV_TEACHER: "VALLEY9"})
    assert given[config.ENV_JOIN] == "BRIDGE" and signing.code_matches("valley9", given[config.ENV_TEACHER_HASH])
    assert any("teacher code (as given): VAL-LEY-9" in line for line in printed)
    assert start(tmp_path)[0][config.ENV_JOIN] == "BRIDGE"  # the given code is the room's from now on
    same, _ = start(tmp_path, **{config.ENV_TEACHER: "valley-9"})  # the same teacher code given again: the same
    assert same[config.ENV_TEACHER_HASH] == given[config.ENV_TEACHER_HASH]  # hash, so teachers stay signed in


def test_bad_codes_are_refused_before_anything_starts(tmp_path):
    with pytest.raises(SystemExit, match="at least 4"):
        start(tmp_path, **{config.ENV_JOIN: "ab"})
    with pytest.raises(SystemExit, match="must differ"):
        start(tmp_path, **{config.ENV_JOIN: "SAME1", config.ENV_TEACHER: "same-1"})


def test_a_room_file_that_cannot_be_used_is_one_line_and_the_room_still_opens(tmp_path):
    (tmp_path / FILE_NAME).write_bytes(b"garbage " * 1000)
    env, printed = start(tmp_path)
    problems = [line for line in printed if "not being saved" in line]
    assert len(problems) == 1 and str(tmp_path / FILE_NAME) in problems[0] and "\n" not in problems[0]
    assert env[config.ENV_JOIN] and env[opening.ENV_PROBLEM] in problems[0]  # the app does not say it a second time
    assert any("teacher code (opens the teacher console" in line for line in printed)  # a new one, shown


def test_the_dashboard_passes_its_room_options_and_refuses_them_without_a_room(tmp_path):
    env: dict = {}
    rest, _ = two_bends_cli.parse_dashboard(["--room", "--data-dir", "rel/dir", "--new-code", "--server.port", "1"], env)
    assert rest == ["--server.port", "1"] and env["TWO_BENDS_NEW_CODE"] == "1"
    assert two_bends_cli.bind_address(env, rest) == "0.0.0.0" and env["TWO_BENDS_DATA_DIR"].endswith("/rel/dir")
    assert env["TWO_BENDS_DATA_DIR"].startswith("/")  # absolute: the launcher runs from the checkout
    for args, why in ((["--data-dir", "x"], "are for a room"), (["--room", "--new-code", "--code", "ABCD"], "not both")):
        env = {}
        two_bends_cli.parse_dashboard(args, env)
        with pytest.raises(two_bends_cli.Refused, match=why):
            two_bends_cli.bind_address(env, [])
