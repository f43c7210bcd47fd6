"""The Room's bookkeeping: anonymous names, locks (checked), the students' model settings, follow-me versions,
labs policy, and clearing the room (students evicted until they enter the code again)."""
import threading

import pytest

from ui.room.registry import Room

SERVER = {"model": "tiny-llama", "device": "auto", "dtype": "float32"}


def test_members_get_distinct_anonymous_names_even_joining_at_once():
    room = Room()
    threads = [threading.Thread(target=room.join, args=(f"s{i}", "student")) for i in range(40)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    names = [m.name for m in room.snapshot()]
    assert len(names) == 40 == len(set(names)) and all(" " in n for n in names)


def test_locks_are_checked_and_copied():
    room = Room()
    got = room.set_locks(max_prompt_tokens=128, labs="all")
    assert got.max_prompt_tokens == 128 and got.labs == "all"
    got.labs = "none"
    assert room.locks.labs == "all"  # a copy: the caller cannot change the room by accident
    with pytest.raises(ValueError, match="labs must be one of"):
        room.set_locks(labs="students")
    with pytest.raises(ValueError, match="between 1 and"):
        room.set_locks(max_output_tokens=0)
    with pytest.raises(ValueError, match="no lock called"):
        room.set_locks(colour="red")
    room.set_locks(max_prompt_tokens=None)
    assert room.locks.max_prompt_tokens is None


def test_students_get_the_teachers_model_unless_the_teacher_locked_another():
    room = Room()
    assert room.student_spec(SERVER) == SERVER  # no teacher yet: the server's model; kernels stay free
    room.note_teacher({"model": "gpt2", "device": "cpu", "dtype": "bfloat16", "kernels": "plain"}, "decode")
    assert room.student_spec(SERVER) == {"model": "gpt2", "device": "cpu", "dtype": "bfloat16"}
    room.set_locks(model="tiny-llama", kernels="fast")
    assert room.student_spec(SERVER) == {"model": "tiny-llama", "device": "cpu", "dtype": "bfloat16", "kernels": "fast"}
    assert room.teacher_page == "decode"
    room.note_teacher({}, "")  # the console: the page students follow stays the last one
    assert room.teacher_page == "decode"


def test_lab_policy():
    room = Room()
    assert room.may_run_lab("teacher") and room.may_run_lab("solo") and not room.may_run_lab("student")
    room.set_locks(labs="all")
    assert room.may_run_lab("student")
    room.set_locks(labs="none")
    assert not room.may_run_lab("teacher") and not room.may_run_lab("student")


def test_follow_version_moves_only_when_what_students_see_changes():
    room = Room()
    assert room.following() == (0, None)
    room.set_follow("decode", {"output_tokens": "64"})
    v1, shown = room.following()
    room.set_follow("decode", {"output_tokens": "64"})  # the teacher's rerun, nothing new
    assert room.following()[0] == v1 and shown == {"page": "decode", "params": {"output_tokens": "64"}}
    room.set_follow("prefill", {"output_tokens": "64"})
    assert room.following()[0] == v1 + 1
    room.set_follow(None, None)
    assert room.following() == (v1 + 2, None)


def test_clearing_the_room_evicts_students_until_they_enter_the_code_again():
    room = Room()
    room.join("t", "teacher")
    room.join("a", "student")
    room.join("b", "student")
    room.set_locks(labs="none")
    room.set_follow("home", {})
    assert sorted(room.clear()) == ["a", "b"]
    assert [m.session_id for m in room.snapshot()] == ["t"]
    room.join("a", "student")  # the gate's call on the evicted session's next run: not back in the room
    assert room.member("a") is None and room.is_evicted("a")
    room.readmit("a")  # sent back to the join form; the code admits it afresh, with a new name
    assert room.join("a", "student").name and room.member("a") is not None
    assert room.locks.labs == "none" and room.following()[1] is not None  # locks and follow-me stay
