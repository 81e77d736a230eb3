"""The README's and docs/'s links: every relative link names a file of the repository, and a
`#fragment` names a heading of that page as GitHub anchors it (lower case, punctuation dropped,
spaces as hyphens), so a reader who clicks one lands where the text says."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def prose(path: Path) -> list[str]:
    """The page's lines outside fenced code blocks."""
    lines, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def anchors(path: Path) -> set[str]:
    """GitHub's anchors of the page's headings: "## Trace keys (`mode` = "model")" →
    "trace-keys-mode--model"."""
    found = set()
    for line in prose(path):
        heading = re.match(r"#+\s+(.*)", line)
        if heading:
            text = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower())
            found.add(text.replace(" ", "-"))
    return found


def links(path: Path) -> list[str]:
    return [m.group(1) for line in prose(path) for m in LINK.finditer(line)]


def test_anchor_rule_matches_a_known_heading():
    assert "trace-keys-mode--model" in anchors(ROOT / "docs" / "model-mode.md")
    assert "multi-pass-full-versus-truncated-gradients" in anchors(ROOT / "README.md")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_reach_a_file_and_heading(page):
    broken = []
    for link in links(page):
        if re.match(r"[a-z]+:", link):  # http:, mailto:
            continue
        target, _, fragment = link.partition("#")
        path = (page.parent / target).resolve() if target else page
        if not path.exists():
            broken.append(f"{link}: no file {path.relative_to(ROOT.parent)}")
        elif fragment and path.suffix == ".md" and fragment not in anchors(path):
            broken.append(f"{link}: no heading #{fragment} in {path.name}")
    assert not broken, f"{page.name}: {broken}"
