"""The README a newcomer reads first: its two commands, the test command CI runs, and its links into
the documentation site in docs/ (the site itself is built by `.ci/run` with `mkdocs build --strict`)."""

import re
from pathlib import Path

from markdown.extensions.toc import slugify

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"

THE_TWO_COMMANDS = (
    "    ./scripts/setup && .venv/bin/orch demo              # the whole job on the lab, end to end",
    "    ./scripts/setup && .venv/bin/python -m pytest       # the tests",
)


def section(text: str, title: str) -> str:
    """The body of the `## title` section of a Markdown text."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, flags=re.MULTILINE | re.DOTALL)
    assert match, f"no section '## {title}'"
    return match.group(1)


def anchors(path: Path) -> set[str]:
    """The anchors MkDocs makes for a page's headings (its toc extension's slugs)."""
    text = re.sub(r"^    .*$", "", path.read_text(), flags=re.MULTILINE)  # code blocks hold no headings
    return {
        slugify(title.replace("`", ""), "-") for title in re.findall(r"^#+ (.+)$", text, flags=re.MULTILINE)
    }


def test_the_two_commands_are_in_the_readme_word_for_word() -> None:
    commands = [
        line
        for line in section(README.read_text(), "The two commands").splitlines()
        if "./scripts/setup &&" in line
    ]
    assert tuple(commands) == THE_TWO_COMMANDS


def test_the_readmes_test_command_is_what_ci_runs() -> None:
    test_command = THE_TWO_COMMANDS[1].split("&&", 1)[1].split("#", 1)[0].strip()
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert test_command == ".venv/bin/python -m pytest"
    assert test_command in ci_lines
    assert "./scripts/setup" in ci_lines


def test_every_link_from_the_readme_reaches_a_page_and_a_heading() -> None:
    text = README.read_text()
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    into_docs = [link for link in links if link.startswith("docs/")]
    assert {link.split("#")[0] for link in into_docs} >= {
        f"docs/{page.name}" for page in DOCS.glob("*.md") if page.name != "index.md"
    }
    for link in links:
        target, _, anchor = link.partition("#")
        page = ROOT / target if target else README
        assert page.is_file(), f"README links to {link}: no such file"
        if anchor:
            assert anchor in anchors(page), (
                f"README links to {link}: {page.name} has no heading with that anchor"
            )


def test_the_readme_keeps_to_what_a_newcomer_needs() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 250
    assert [title for title in re.findall(r"^## (.+)$", text, flags=re.MULTILINE)] == [
        "The two commands",
        "A five-minute tour",
        "Where to read on",
    ]
