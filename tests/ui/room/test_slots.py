"""One run in flight per session in a room, and who may start labs: the slot table and the lab policy."""
from engine.serving.scheduling import lab_jobs
from engine.serving.scheduling.work import Done, Failed, Job, Request
from ui.room import slots as room_slots
from ui.room.slots import ONE_AT_A_TIME, Slots, lab_refusal


def held(slots: Slots, sid: str, work):
    slots.watch(work)
    slots.hold(sid, work)
    return work


def test_a_second_run_is_refused_while_the_first_is_in_the_engine_and_allowed_once_it_ended():
    slots = Slots()
    first = held(slots, "a", Request(prompt_ids=[1, 2], max_new_tokens=4))
    assert slots.refusal("a") == ONE_AT_A_TIME
    assert slots.refusal("b") is None  # another student is not affected
    first.emit(Done(None))
    assert slots.refusal("a") is None


def test_a_cancelled_or_failed_run_frees_the_slot():
    slots = Slots()
    run = held(slots, "a", Request())
    run.cancel()
    assert slots.refusal("a") is None
    failed = held(slots, "a", Request())
    failed.emit(Failed("boom"))
    assert slots.refusal("a") is None


def test_a_closed_tab_frees_its_slot_and_hands_back_its_work():
    slots = Slots()
    run = held(slots, "gone", Request())
    assert set(slots.busy()) == {"gone"}
    assert slots.release("gone") is run and slots.refusal("gone") is None and not slots.busy()


def test_labs_follow_the_teachers_policy():
    assert lab_refusal("teacher", "student") and lab_refusal("teacher", "teacher") is None
    assert lab_refusal("all", "student") is None
    assert lab_refusal("none", "student") and lab_refusal("none", "teacher")
    assert lab_refusal("none", "solo") is None  # outside room mode everything is open


def test_loading_a_model_and_capturing_attention_are_not_labs():
    assert not room_slots.is_lab(Job(name=lab_jobs.MODEL_DESCRIBE.name))
    assert not room_slots.is_lab(Job(name=lab_jobs.ATTENTION_CAPTURE.name))
    assert room_slots.is_lab(Job(name=lab_jobs.PROMPT_SWEEP.name)) and not room_slots.is_lab(Request())
    assert room_slots.describe(Request(prompt_ids=[1] * 64, max_new_tokens=32)) == "64 → 32 tokens"
