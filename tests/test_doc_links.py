"""Every relative link in the README, docs/, the model cards and experiments/README.md reaches a file, and every
``#anchor`` a heading of the page it names (GitHub's heading ids)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def heading_id(heading: str) -> str:
    """GitHub's id for a heading: lower case, punctuation but '-' and '_' dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def heading_ids(page: Path) -> set[str]:
    ids, fenced = set(), False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            ids.add(heading_id(line.lstrip("#")))
    return ids


def broken_links(page: Path) -> list[str]:
    """The relative links of ``page`` that reach no file, or no heading of the page they name."""
    broken = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists() or (anchor and linked.suffix == ".md" and anchor not in heading_ids(linked)):
            broken.append(target)
    return broken


def test_the_pages_links_reach_their_files_and_headings() -> None:
    pages = [ROOT / "README.md", ROOT / "experiments" / "README.md", *ROOT.glob("docs/*.md")]
    pages += sorted((ROOT / "assets").glob("**/*.md"))
    assert len(pages) > 8
    assert {str(p.relative_to(ROOT)): broken_links(p) for p in pages if broken_links(p)} == {}


def test_a_link_to_a_missing_heading_or_file_is_broken(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Where the speed targets stand\n\n```\n# not a heading\n```\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#where-the-speed-targets-stand) [ok](#here) [web](https://x.org/#y)\n"
        "[gone](other.md#not-a-heading) [missing](nowhere.md) [self](#nowhere)\n\n## Here\n"
    )
    assert broken_links(page) == ["other.md#not-a-heading", "nowhere.md", "#nowhere"]
