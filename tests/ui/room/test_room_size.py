"""The room size the teacher console shows: this host's saved measurement or a labelled estimate, and the warning as
the room nears or passes it."""
import json

from ui.room import room_size


def _saved(tmp_path, host="here", queue=6, batch=4, every=False):
    env = {"XDG_DATA_HOME": str(tmp_path)}
    result = room_size.new_result(host, 2, "smollm2-135m", 60.0)
    result["modes"] = {"queue": {"students": queue, "every_size_held": every}, "batch": {"students": batch}}
    room_size.save(result, env)
    return env


def test_this_hosts_measurement_is_read_and_another_hosts_is_not(tmp_path):
    env = _saved(tmp_path, host="here")
    assert room_size.load(env, host="here")["modes"]["queue"]["students"] == 6
    assert room_size.load(env, host="elsewhere") is None


def test_a_damaged_or_older_file_is_not_read(tmp_path):
    env = _saved(tmp_path)
    room_size.path(env).write_text("{not json")
    assert room_size.load(env, host="here") is None
    room_size.path(env).write_text(json.dumps({"version": 0, "host": "here", "modes": {"queue": {}}}))
    assert room_size.load(env, host="here") is None


def test_without_a_measurement_the_line_says_it_is_an_estimate():
    size = room_size.estimate(2)
    level, words = room_size.line(size, 3, "queue")
    assert not size.measured and "an estimate" in words and "benchmarks.room_size" in words
    assert room_size.estimate(8).queue >= size.queue  # more cores never hold fewer students


def test_the_line_warns_near_the_size_and_advises_a_serving_engine_past_it(tmp_path):
    size = room_size.measured(room_size.load(_saved(tmp_path, queue=10, batch=5), host="here"))
    assert room_size.line(size, 3, "queue")[0] == "info"
    assert room_size.line(size, 8, "queue")[0] == "warning"
    level, words = room_size.line(size, 11, "queue")
    assert level == "error" and "--engine-url" in words
    assert room_size.line(size, 6, "batch")[0] == "error"  # the room's own mode decides
    assert "10 students in queue mode, about 5 in batch mode; you have 11" in words


def test_a_size_every_tried_room_held_is_a_floor(tmp_path):
    size = room_size.measured(room_size.load(_saved(tmp_path, queue=4, every=True), host="here"))
    level, words = room_size.line(size, 5, "queue")
    assert "at least 4" in words and level == "warning" and "larger than any room measured" in words


def test_a_machine_that_held_no_room_tried_says_so(tmp_path):
    size = room_size.measured(room_size.load(_saved(tmp_path, queue=0, batch=0), host="here"))
    level, words = room_size.line(size, 2, "queue")
    assert level == "warning" and "did not hold the smallest room" in words and "--engine-url" in words
