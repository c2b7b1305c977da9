"""Source links point at a tag or a commit, never at a moving branch (issue 16 item 7): a course that cites a page
must find the code it cites as it was. A link that cannot be pinned goes in ALLOWED with the reason."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# A GitHub file or folder at a branch name rather than a tag or commit.
BRANCH_LINK = re.compile(r"https://(?:github\.com/[\w.-]+/[\w.-]+/(?:blob|tree|raw)|raw\.githubusercontent\.com/"
                         r"[\w.-]+/[\w.-]+)/(?:main|master|develop|dev|trunk)/[^\s\"')>\]]*")
# url -> why it cannot be pinned. Empty: every source link in the content is pinned today.
ALLOWED: dict[str, str] = {}


def branch_links() -> list[str]:
    found = []
    for path in sorted([*(ROOT / "content").rglob("*"), ROOT / "README.md", *(ROOT / "templates").rglob("*.html")]):
        if path.is_file() and path.suffix in (".md", ".toml", ".html", ".yaml", ".yml", ".json"):
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                found += [f"{path.relative_to(ROOT)}:{number}: {url}" for url in BRANCH_LINK.findall(line)
                          if url not in ALLOWED]
    return found


def test_no_source_link_points_at_a_branch():
    assert branch_links() == [], "pin these links to a tag or commit (or add them to ALLOWED with the reason)"


def test_the_pattern_catches_branch_links_and_spares_pinned_ones():
    assert BRANCH_LINK.findall('url = "https://github.com/a/b/blob/main/x.py"') == ["https://github.com/a/b/blob/main/x.py"]
    assert BRANCH_LINK.findall("see https://github.com/a/b/tree/master/docs.") == ["https://github.com/a/b/tree/master/docs."]
    assert BRANCH_LINK.findall("https://raw.githubusercontent.com/a/b/main/f.json")
    assert BRANCH_LINK.findall("https://github.com/a/b/blob/v1.2.0/x.py https://github.com/a/b/blob/"
                               "38644dd756c46142787b1bd5dc08ed82ca0e6de1/x.py https://github.com/a/b") == []


def test_the_pinned_references_keep_their_commits():
    text = (ROOT / "content" / "references.toml").read_text(encoding="utf-8")
    pinned = re.findall(r'^url = "https://github\.com/[^"]+/blob/([0-9a-f]{40}|v[\w.]+)/', text, re.M)
    assert len(pinned) >= 10
