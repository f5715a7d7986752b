"""The README and docs/ stand alone: they name no path outside the repository (a reader has only the
clone), every document they mention exists in it (and every section they cite by name, as a heading or a
bold lead), and they carry no notes about how the work was done (issue numbers, counts of the day). The
OpenAPI and AsyncAPI documents, which users read too, name no outside path either."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from service import contracts

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
OUTSIDE = re.compile(r"(?:(?<!\.)\.\./|shared/spec|/work/|spec/[a-z-]+\.md|~/)")
LINK = re.compile(r"\[[^\]]*\]\(([^)#\s]+)(?:#[^)]*)?\)")
MENTION = re.compile(r"(?<![\w/.\[-])([\w/.-]*[\w-]\.md)\b(?:\)?,?\s*\*([^*]+)\*)?")
WORK_NOTES = re.compile(r"(?<!Kubernetes )\b[Ii]ssue \d+|\bdeliverables? \d|\b\d+ files today\b|\bthe lead\b")


def _without_links(text: str) -> str:
    return LINK.sub(lambda m: f"]({m.group(1)})", text).replace("](", " ](")


def _headings(path: Path) -> list[str]:
    text = path.read_text()
    return [line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")] + \
        re.findall(r"\*\*([^*]+)\*\*", text)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_no_path_outside_the_repository(doc: Path) -> None:
    found = [f"{doc.name}:{n}: {line.strip()}" for n, line in enumerate(doc.read_text().splitlines(), 1)
             if OUTSIDE.search(line)]
    assert found == [], "a doc names a path outside the repository:\n" + "\n".join(found)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_document_mentioned_is_in_the_repository(doc: Path) -> None:
    missing = []
    text = doc.read_text()
    for target in LINK.findall(text):
        if not target.startswith(("http://", "https://", "mailto:")) and not (doc.parent / target).exists():
            missing.append(f"link {target}")
    for name, section in MENTION.findall(_without_links(text)):
        path = next((p for p in (doc.parent / name, ROOT / name) if p.is_file()), None)
        if path is None:
            missing.append(name)
        elif section and not any(section.strip().lower() in h.lower() for h in _headings(path)):
            missing.append(f"{name}, *{section}*")
    assert missing == [], f"{doc.name} mentions what the repository does not hold: {missing}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_no_notes_about_how_the_work_was_done(doc: Path) -> None:
    found = [f"{doc.name}:{n}: {m.group(0)}" for n, line in enumerate(doc.read_text().splitlines(), 1)
             for m in WORK_NOTES.finditer(line)]
    assert found == [], found


def test_the_published_documents_name_no_outside_path() -> None:
    for path, text in contracts.generate().items():
        assert not OUTSIDE.search(text), f"contracts/{path}: {OUTSIDE.search(text)}"


def test_the_checks_can_fail(tmp_path: Path) -> None:
    """The patterns catch what they are for (so an empty finding means something)."""
    assert OUTSIDE.search("see [replicas](../shared/spec/replicas.md)")
    assert OUTSIDE.search("The contract is `shared/spec/http.md`")
    assert not OUTSIDE.search("see [docs/http.md](docs/http.md) and contracts/openapi.json")
    assert WORK_NOTES.search("16 files today (the issue asks for 50)") and WORK_NOTES.search("## Decider (issue 2)")
    assert not WORK_NOTES.search("Kubernetes issue 142330")
    assert MENTION.findall("(model.md, *Exclusive topology*)") == [("model.md", "Exclusive topology")]
    assert MENTION.findall(_without_links("[http.md](docs/http.md)")) == [("docs/http.md", "")]
