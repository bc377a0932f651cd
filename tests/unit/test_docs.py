"""The project's Markdown pages hold together: every relative link resolves, the rules table is the registry.

A link to a moved page, or to a heading that was reworded, fails here with the page, the line and the
target, rather than as a 404 on GitHub. Anchors are checked against the target page's headings, slugged
as GitHub slugs them. The checker is tested on a page with a broken link of each kind.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", flags=re.S | re.M)
INLINE_CODE = re.compile(r"`[^`\n]*`")
EXTERNAL = ("http://", "https://", "mailto:")


def pages() -> list[Path]:
    """README.md, docs/, bench/ and infra/ pages: what a reader navigates."""
    found = [REPO_ROOT / "README.md", REPO_ROOT / "infra" / "README.md"]
    for folder in ("docs", "bench", "bench/journal"):
        found += sorted((REPO_ROOT / folder).glob("*.md"))
    return found


def heading_slugs(page: Path) -> set[str]:
    """GitHub's anchors for the headings of ``page``: lower case, punctuation dropped, spaces to hyphens,
    a repeated heading numbered from -1."""
    slugs: set[str] = set()
    seen: dict[str, int] = {}
    for line in FENCE.sub("", page.read_text()).splitlines():
        match = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        slug = re.sub(r"[^\w\- ]", "", match.group(1).lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        slugs.add(slug if count == 0 else f"{slug}-{count}")
    return slugs


def broken_links(page: Path) -> list[str]:
    """``page:line: target (why)`` for each relative link of ``page`` that does not resolve."""
    text = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), page.read_text())
    problems = []
    for number, line in enumerate(text.splitlines(), 1):
        for target in LINK.findall(INLINE_CODE.sub("", line)):
            if target.startswith(EXTERNAL):
                continue
            path_part, _, anchor = target.partition("#")
            resolved = (page.parent / path_part).resolve() if path_part else page
            where = f"{page.relative_to(REPO_ROOT)}:{number}: {target}"
            if not resolved.exists():
                problems.append(f"{where} (no such file)")
            elif anchor and resolved.suffix == ".md" and anchor not in heading_slugs(resolved):
                problems.append(f"{where} (no heading #{anchor} in {resolved.name})")
    return problems


def test_every_relative_link_resolves() -> None:
    problems = [problem for page in pages() for problem in broken_links(page)]
    assert not problems, "broken links:\n" + "\n".join(problems)


def test_the_pages_checked_include_the_guide_and_the_journal() -> None:
    names = {p.relative_to(REPO_ROOT).as_posix() for p in pages()}
    assert {"README.md", "docs/GUIDE.md", "docs/SECURITY.md", "bench/RESULTS.md"} <= names
    assert any(name.startswith("bench/journal/") for name in names)


@pytest.mark.parametrize(
    ("link", "why"),
    [
        ("[gone](docs/NOWHERE.md)", "no such file"),
        ("[moved](#a-heading-that-is-not-there)", "no heading #a-heading-that-is-not-there in page.md"),
        ("[reworded](other.md#old-name)", "no heading #old-name in other.md"),
    ],
)
def test_the_checker_reports_a_broken_link(tmp_path: Path, monkeypatch, link: str, why: str) -> None:
    monkeypatch.setattr(f"{__name__}.REPO_ROOT", tmp_path)
    (tmp_path / "other.md").write_text("# Other\n\n## New name\n")
    page = tmp_path / "page.md"
    page.write_text(f"# Page\n\n## Some `code` heading (x)\n\nsee {link} and [ok](other.md#new-name)\n")
    assert broken_links(page) == [f"page.md:5: {link.split('](')[1][:-1]} ({why})"]


def test_the_checker_passes_good_links_and_ignores_code(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(f"{__name__}.REPO_ROOT", tmp_path)
    (tmp_path / "other.md").write_text("# Other\n\n## Twice\n\n## Twice\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n## Some `code` heading (x)\n\n"
        "[a](other.md) [b](other.md#twice-1) [c](#some-code-heading-x) [d](https://example.com/x)\n"
        "`[not a link](nowhere.md)`\n\n```\n[not a link](nowhere.md)\n```\n"
    )
    assert broken_links(page) == []


def test_the_rule_table_lists_exactly_the_registered_rules() -> None:
    """docs/RULES.md's catalogue is the registry: a rule added or renamed without its row fails here."""
    from tornasole.rules import rule_names

    text = (REPO_ROOT / "docs" / "RULES.md").read_text()
    table = text.split("\n## Built-in rules", 1)[1].split("\n## ", 1)[0]
    names = re.findall(r"^\| (\w+) \|", table, flags=re.M)
    assert sorted(n for n in names if n != "rule") == sorted(rule_names())
