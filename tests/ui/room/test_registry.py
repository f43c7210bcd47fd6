"""The Room's bookkeeping: anonymous names, members by browser (tabs come and go, the member stays), sign-in tokens,
locks (checked), the students' model settings, follow-me versions, labs policy, and clearing the room (students
evicted until they enter the new code)."""
import threading

import pytest

from ui.room import signing
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


def test_clearing_the_room_evicts_students_until_they_enter_the_new_code():
    room = Room("BRIDGE", signing.hash_code("VALLEY9"))
    teacher = room.join("t", "teacher")
    student = room.join("a", "student")
    room.join("b", "student")
    token = room.sign_in_token(student)
    room.set_locks(labs="none")
    room.set_follow("home", {})
    assert sorted(room.clear()) == ["a", "b"]
    assert [m.member_id for m in room.snapshot()] == [teacher.member_id]
    assert room.join_code != "BRIDGE" and room.role_for("BRIDGE") is None and room.role_for(room.join_code) == "student"
    room.join("a", "student")  # the gate's call on the evicted session's next run: not back in the room
    assert room.member("a") is None and room.is_evicted("a")
    assert room.returning(token) is None  # its browser's sign-in no longer admits it
    room.readmit("a")  # sent back to the join form; the code admits it afresh, with a new name
    assert room.join("a", "student").name and room.member("a") is not None
    assert room.locks.labs == "none" and room.following()[1] is not None  # locks and follow-me stay


def test_a_member_is_a_browser_its_tabs_come_and_go():
    room = Room("BRIDGE")
    first = room.join("tab-1", "student")
    second = room.join("tab-2", "student", member_id=first.member_id)  # the same browser's second tab (its cookie)
    assert second is first and room.member("tab-2") is first and len(room.snapshot()) == 1
    assert room.keep_only({"tab-2"}) == ["tab-1"] and room.present()[0].sessions == {"tab-2"}
    room.keep_only(set())  # every tab closed: away, still a member
    assert room.present() == [] and [m.name for m in room.snapshot()] == [first.name]
    again = room.join("tab-3", "student", member_id=first.member_id)  # a reload (or the server's restart)
    assert again is first and again.connected


def test_a_sign_in_token_admits_its_member_and_nothing_else():
    room = Room("BRIDGE", signing.hash_code("VALLEY9"))
    student, teacher = room.join("s", "student"), room.join("t", "teacher")
    assert room.returning(room.sign_in_token(student)) is student
    assert room.returning(room.sign_in_token(teacher)) is teacher
    member_id, _, mac = room.sign_in_token(student).split(".")
    assert room.returning(f"{member_id}.teacher.{mac}") is None  # a student's token made a teacher's: refused
    token = room.sign_in_token(student)
    forged = token[:-1] + ("1" if token.endswith("0") else "0")  # one character of the signature changed
    assert room.returning(forged) is None and room.returning("nonsense") is None
    assert Room("BRIDGE").returning(room.sign_in_token(student)) is None  # another room's secret
    room.teacher_hash = signing.hash_code("NEWCODE1")  # a new teacher code signs teachers out, not students
    assert room.returning(room.sign_in_token(teacher)) is teacher  # (a token made now is good)
    old = signing.sign(room.secret, teacher.member_id, "teacher", signing.hash_code("VALLEY9"))
    assert room.returning(old) is None and room.returning(room.sign_in_token(student)) is student


def test_removing_one_student_sends_only_that_browser_back():
    room = Room("BRIDGE")
    a, b = room.join("a1", "student"), room.join("b1", "student")
    room.join("a2", "student", member_id=a.member_id)
    assert sorted(room.remove(a.member_id)) == ["a1", "a2"]
    assert room.is_evicted("a1") and room.is_evicted("a2") and not room.is_evicted("b1")
    assert [m.member_id for m in room.snapshot()] == [b.member_id]
    assert room.remove(b.member_id) == ["b1"] and room.remove("nobody") == []


def test_codes_compare_case_and_dash_insensitively_the_teachers_through_its_hash():
    room = Room("BRIDGE", signing.hash_code("VALLEY9"))
    assert "VALLEY9" not in room.teacher_hash
    assert room.role_for("bri-dge") == "student" and room.role_for(" valley-9 ") == "teacher"
    assert room.role_for("BRIDG") is None and room.role_for("") is None
    assert Room("", "").role_for("") is None  # no code set: nothing matches
