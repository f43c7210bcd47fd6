"""The suite mirrors the packages: the test of engine/serving/scheduling/scheduler.py sits in
tests/engine/serving/scheduling/test_scheduler.py."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the project folder
