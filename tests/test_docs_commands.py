"""The shell sessions of the README and the docs pages run as shown: each
command with the fake agent, its output the same as a run's now, up to what
changes from run to run (see ``tests/docs_samples.py``; ``scripts/docs-samples``
rewrites the outputs)."""

from __future__ import annotations

import pytest

from tests.docs_samples import ROOT, Session, normalized, run, sessions

SESSIONS = list(sessions())


def test_the_documents_show_sessions_that_run_offline() -> None:
    names = {(session.path.relative_to(ROOT).as_posix(), session.name) for session in SESSIONS}
    assert {
        ("README.md", "worked example"),
        ("docs/getting-started.md", "demo"),
        ("docs/getting-started.md", "linger"),
        ("docs/hooks.md", "quality gate"),
    } <= names
    for session in SESSIONS:
        assert session.commands, session.name
        # Offline: the commands start the bundled fake agent, never a real one.
        agents = [c for c in session.commands if "agent-wrapper run" in c or "scripts/demo" in c]
        assert all("fixtures/fake_agent/" in c or c == "scripts/demo" for c in agents), agents


@pytest.mark.parametrize(
    "session", SESSIONS, ids=[f"{s.path.relative_to(ROOT)}:{s.name}" for s in SESSIONS]
)
def test_a_session_prints_what_the_document_shows(session: Session) -> None:
    now = run(session)
    assert len(now) == len(session.commands), now
    for (command, shown), output in zip(session.steps, now, strict=True):
        assert normalized(output) == normalized(shown), (
            f"{command}\n--- the document shows:\n{shown}--- a run now prints:\n{output}"
            "(scripts/docs-samples rewrites the document from a run)"
        )


def test_the_readme_and_the_sites_home_map_the_same_pages() -> None:
    def page_map(text: str) -> str:
        start = text.index("| page | what it holds |")
        return text[start : text.index("\n\n", start)]

    readme = page_map((ROOT / "README.md").read_text())
    assert page_map((ROOT / "docs" / "index.md").read_text()) == readme.replace("](docs/", "](")
