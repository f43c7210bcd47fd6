"""The docs hold up: every relative link in README.md and docs/** reaches its file and heading, every command they
show (`two-bends X`, `python -m engine X`, `python -m benchmarks.X`, `bash scripts/X.sh`, ...) answers --help, and
the package's metadata agrees with the pinned requirements. The commands are found in the docs, not listed here, so
a command documented later is checked too."""
from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests import ROOT

FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.M | re.S)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
INLINE_CODE = re.compile(r"`([^`\n]+)`")
# what a command looks like in the docs: the program, then the word that picks a subcommand or script
TWO_BENDS = re.compile(r"(?<![\w/.-])(?:\.venv/bin/)?two-bends(?:\s+([a-z][\w-]*))?")
PYTHON_M = re.compile(r"(?<![\w/.-])(?:\.venv/bin/)?python3?\s+-m\s+([A-Za-z_][\w.]*)(?:\s+([a-z][\w-]*))?")
PYTHON_FILE = re.compile(r"(?<![\w/.-])(?:\.venv/bin/)?python3?\s+((?:benchmarks|scripts)/[\w.-]+\.py)")
SHELL_SCRIPT = re.compile(r"(?<![\w/.-])((?:scripts|benchmarks)/[\w.-]+\.sh)")
OURS = ("engine", "benchmarks", "two_bends_cli", "ui")


def documents(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: links and code marks dropped, lower case, punctuation gone, spaces to '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of a Markdown file's headings (a repeated heading gets -1, -2, ... as on GitHub)."""
    names, counts = set(), {}
    for line in FENCE.sub("", path.read_text()).splitlines():
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            base = slug(m.group(1))
            n = counts.get(base, 0)
            counts[base] = n + 1
            names.add(base if n == 0 else f"{base}-{n}")
    return names


def broken_links(paths: list[Path], root: Path = ROOT) -> list[str]:
    """'file: target (why)' for every relative link that reaches no file, or no heading of the file it names."""
    broken = []
    for path in paths:
        prose = INLINE_CODE.sub("", FENCE.sub("", path.read_text()))
        for target in LINK.findall(prose):
            if re.match(r"[a-z][a-z+.-]*:", target):  # https:, mailto: ... : not ours to check offline
                continue
            file_part, _, anchor = target.partition("#")
            dest = (path.parent / file_part).resolve() if file_part else path
            where = f"{path.relative_to(root)}: {target}"
            if not dest.exists():
                broken.append(f"{where} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{where} (no heading '#{anchor}' in {dest.name})")
    return broken


def command_lines(text: str) -> list[str]:
    """The lines of every fenced block (continuations joined) and every inline code span."""
    lines = []
    for block in FENCE.finditer(text):
        body = block.group(0).split("\n", 1)[1].rsplit("\n", 1)[0]
        lines += body.replace("\\\n", " ").splitlines()
    return lines + INLINE_CODE.findall(FENCE.sub("", text))


def commands(text: str) -> set[tuple[str, ...]]:
    """Each command shown, as the argv that asks it for --help (this interpreter for Python, bash for shell)."""
    found = set()
    for line in command_lines(text):
        for m in TWO_BENDS.finditer(line):
            found.add((sys.executable, "-m", "two_bends_cli", *filter(None, [m.group(1)]), "--help"))
        for m in PYTHON_M.finditer(line):
            module, sub = m.group(1), m.group(2)
            if module.split(".")[0] in OURS and not any(part.isupper() for part in module.split(".")):  # NAME: a placeholder
                found.add((sys.executable, "-m", module, *([sub] if module == "engine" and sub else []), "--help"))
        for m in PYTHON_FILE.finditer(line):
            found.add((sys.executable, m.group(1), "--help"))
        for m in SHELL_SCRIPT.finditer(line):
            found.add(("bash", m.group(1), "--help"))
    return found


def help_fails(argv: tuple[str, ...], cwd: Path = ROOT) -> str | None:
    """None when the command prints its help and exits 0; otherwise why not."""
    try:
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return "no answer within 120 s"
    if done.returncode != 0 or not done.stdout.strip():
        return f"exit {done.returncode}: {(done.stderr or done.stdout).strip()[-400:]}"
    return None


SHOWN = sorted({c for path in documents() for c in commands(path.read_text())})


def test_every_relative_link_reaches_its_file_and_heading():
    assert broken_links(documents()) == []


@pytest.mark.parametrize("argv", SHOWN, ids=[" ".join(c[1:-1]).replace(sys.executable, "python") for c in SHOWN])
def test_every_command_the_docs_show_answers_help(argv):
    assert help_fails(argv) is None


def test_the_docs_show_both_commands_and_each_kind_of_command():
    shown = {" ".join(c[1:]) for c in SHOWN}
    assert {"scripts/dashboard.sh --help", "scripts/test.sh --help"} <= shown  # the README's two commands
    for kind in ("-m two_bends_cli ", "-m engine ", "-m benchmarks.", "scripts/", "benchmarks/"):
        assert any(kind in s for s in shown), kind  # the patterns still find what the docs show


def test_the_checks_fail_on_a_broken_link_an_unknown_heading_and_a_command_that_does_not_exist(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "real.md").write_text("# A real heading\n\n## `two-bends serve`, behind HTTP\n")
    (tmp_path / "README.md").write_text(
        "[gone](docs/gone.md) [fine](docs/real.md#a-real-heading) [code](docs/real.md#two-bends-serve-behind-http)\n"
        "[typo](docs/real.md#a-real-headin) [here](#nowhere) [web](https://example.org/x)\n\n"
        "```bash\n.venv/bin/two-bends no-such-command --flag\nbash scripts/no_such.sh\n```\n")
    assert [b.split(": ", 1)[1] for b in broken_links(documents(tmp_path), tmp_path)] == [
        "docs/gone.md (no such file)", "docs/real.md#a-real-headin (no heading '#a-real-headin' in real.md)",
        "#nowhere (no heading '#nowhere' in README.md)"]
    shown = commands((tmp_path / "README.md").read_text())
    assert shown == {(sys.executable, "-m", "two_bends_cli", "no-such-command", "--help"),
                     ("bash", "scripts/no_such.sh", "--help")}
    assert all(help_fails(argv) for argv in shown)


def test_headings_get_githubs_anchors():
    assert slug("Two Bends — prefill and decode, seen and measured") == "two-bends--prefill-and-decode-seen-and-measured"
    assert slug("vLLM's own benchmark client against ours") == "vllms-own-benchmark-client-against-ours"
    assert slug("[The room](x.md): `two-bends dashboard --room`") == "the-room-two-bends-dashboard---room"


def test_the_readme_stays_a_readme():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250


def _pins(path: Path) -> list[str]:
    return [line.split("#")[0].strip() for line in path.read_text().splitlines()
            if line.split("#")[0].strip() and not line.startswith("-r")]


def test_the_package_pins_what_the_requirements_pin():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["dependencies"] == _pins(ROOT / "requirements.txt")
    assert project["optional-dependencies"]["dev"] == _pins(ROOT / "requirements-dev.txt")
    assert "torch==2.13.0" in project["dependencies"]  # the CPU build's pin that a fresh clone relies on


def test_the_two_bends_command_is_the_entry_module():
    import two_bends_cli

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"two-bends": "two_bends_cli:main"} and callable(two_bends_cli.main)
