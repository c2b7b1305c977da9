"""Built pages read as HTML, not as exact strings: the build minifies every page (builder/page_minify.py), so
a test asks for an element, its attributes or its text, whatever the whitespace, quotes and character
references the minifier chose."""

from __future__ import annotations

from html.parser import HTMLParser

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class Elements(HTMLParser):
    """Every element of a page, in document order: its tag, its attributes (character references resolved)
    and its text (all the text inside it, references resolved)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str], list[str]]] = []
        self.open: list[tuple[str, list[str]]] = []

    def handle_starttag(self, tag, attrs):
        text: list[str] = []
        self.elements.append((tag, {key: value or "" for key, value in attrs}, text))
        if tag not in VOID:
            self.open.append((tag, text))

    def handle_startendtag(self, tag, attrs):
        self.elements.append((tag, {key: value or "" for key, value in attrs}, []))

    def handle_endtag(self, tag):
        if any(name == tag for name, _ in self.open):
            while self.open.pop()[0] != tag:
                pass

    def handle_data(self, data):
        for _, text in self.open:
            text.append(data)


def document(page: str) -> list[tuple[str, dict[str, str], str]]:
    """(tag, attributes, text) of every element of `page` in document order (names in lower case)."""
    parser = Elements()
    parser.feed(page)
    parser.close()
    return [(name, attrs, "".join(text)) for name, attrs, text in parser.elements]


def elements(page: str, tag: str) -> list[tuple[dict[str, str], str]]:
    """(attributes, text) of every `tag` element of `page`."""
    return [(attrs, text) for name, attrs, text in document(page) if name == tag]


def attributes(page: str, tag: str) -> list[dict[str, str]]:
    """The attributes of every `tag` element of `page`."""
    return [attrs for attrs, _ in elements(page, tag)]


def texts(page: str, tag: str) -> list[str]:
    """The text of every `tag` element of `page`."""
    return [text for _, text in elements(page, tag)]
