"""scripts/cpu_wait_check.py runs end to end on the tiny model and writes what it prints: every condition's step,
wait and added time, and refuses conditions it does not know."""
import json
import subprocess
import sys

from tests import ROOT

SCRIPT = str(ROOT / "scripts" / "cpu_wait_check.py")


def test_a_short_check_prints_and_writes_each_condition(tmp_path):
    out = subprocess.run([sys.executable, SCRIPT, "--model", "tiny-llama", "--rounds", "1", "--tokens", "3",
                          "--conditions", "quiet,5 of 33 ms", "--json", str(tmp_path / "w.json")],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "added/wait" in out.stdout and "5 of 33 ms" in out.stdout
    medians = json.loads((tmp_path / "w.json").read_text())["medians"]
    assert list(medians) == ["quiet", "5 of 33 ms"]
    assert medians["quiet"]["added_ms"] == 0.0 and medians["quiet"]["added_per_wait"] is None
    beside = medians["5 of 33 ms"]
    assert beside["step_ms"] > 0 and beside["wait_ms"] >= 0 and beside["wait_all_ms"] >= beside["wait_ms"]


def test_unknown_conditions_are_refused_with_the_known_ones():
    out = subprocess.run([sys.executable, SCRIPT, "--model", "tiny-llama", "--conditions", "quiet,a storm"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode != 0 and "8 of 16.7 ms" in out.stderr
