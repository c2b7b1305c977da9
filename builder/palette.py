"""The chart palette, read from static/charts.css (its one source).

A chart's SVG names its colours by class (tm-bucket-weights, tm-text, ...). On a page the site
stylesheet paints them, per theme, and the page's copy carries nothing else. A chart that travels
alone (the downloadable files, builder/charts/standalone.py) needs the colours written into it:
`resolve` works out, for an element's
classes, what charts.css gives it in the light or the dark theme, as SVG presentation attributes.
Only the small subset of CSS that charts.css uses is understood: custom properties on :root (the
dark ones inside `@media (prefers-color-scheme: dark)`), and rules whose selectors are
`.tm-chart .a.b` or `svg.tm-chart`; other @media blocks (print) are skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

CHARTS_CSS = Path(__file__).resolve().parent.parent / "static" / "charts.css"
THEMES = ("light", "dark")

# CSS properties written into an SVG as presentation attributes (the rest stay page-only).
PRESENTED = ("fill", "stroke", "stroke-width", "stroke-linejoin", "stroke-opacity", "fill-opacity", "paint-order",
             "font-family")


@dataclass(frozen=True)
class Rule:
    """One CSS rule of charts.css: the class sets it matches (one per selector) and its declarations."""

    selectors: tuple[frozenset[str], ...]
    declarations: tuple[tuple[str, str], ...]
    order: int


@dataclass(frozen=True)
class Stylesheet:
    """charts.css as data: each theme's custom properties, and the chart rules in file order."""

    variables: dict[str, dict[str, str]]  # theme -> {'--tm-bg': '#ffffff', ...}
    rules: tuple[Rule, ...]
    root: tuple[tuple[str, str], ...]  # declarations of `svg.tm-chart` (font-family)
    # (classes, theme) -> what resolve found: a build paints thousands of elements with a few dozen class lists
    resolved: dict[tuple[tuple[str, ...], str], dict[str, str]] = field(default_factory=dict, compare=False,
                                                                        repr=False)

    def resolve(self, classes: list[str] | tuple[str, ...], theme: str = "light") -> dict[str, str]:
        """Presentation attributes for an element with these classes: the declarations of every matching
        rule, more specific and later rules winning, var() replaced by the theme's value."""
        key = (tuple(classes), theme)
        if key not in self.resolved:
            self.resolved[key] = self.match(classes, theme)
        return dict(self.resolved[key])

    def match(self, classes: list[str] | tuple[str, ...], theme: str) -> dict[str, str]:
        """What resolve returns, worked out from the rules."""
        have = set(classes)
        matches = []
        for rule in self.rules:
            best = max((len(s) for s in rule.selectors if s <= have), default=0)
            if best:
                matches.append((best, rule.order, rule))
        found: dict[str, str] = {}
        for _, _, rule in sorted(matches, key=lambda m: m[:2]):
            found.update(rule.declarations)
        return {prop: self.value(value, theme) for prop, value in found.items() if prop in PRESENTED}

    def value(self, value: str, theme: str) -> str:
        """A declared value with var(--x) replaced and 'px' dropped from lengths (SVG attributes are unitless)."""
        value = re.sub(r"var\((--[a-z0-9-]+)\)", lambda m: self.variables[theme][m.group(1)], value)
        return re.sub(r"^(\d+(?:\.\d+)?)px$", r"\1", value)

    def colour(self, name: str, theme: str = "light") -> str:
        """A custom property's value in a theme: colour('--tm-bg', 'dark')."""
        return self.variables[theme][name]

    def font_family(self) -> str:
        """The chart font stack, with single quotes so it can sit in an attribute."""
        return dict(self.root)["font-family"].replace('"', "'")


def strip_comments(css: str) -> str:
    """The stylesheet without /* comments */."""
    return re.sub(r"/\*.*?\*/", "", css, flags=re.S)


def split_media(css: str) -> tuple[str, dict[str, str]]:
    """The top level of `css` without @media blocks, and each @media block's body by its condition."""
    top, blocks, index = [], {}, 0
    for match in re.finditer(r"@media([^{]*)\{", css):
        if match.start() < index:
            continue
        depth, end = 1, match.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(css[end], 0)
            end += 1
        top.append(css[index:match.start()])
        blocks[" ".join(match.group(1).split())] = css[match.end():end - 1]
        index = end
    top.append(css[index:])
    return "".join(top), blocks


def read_variables(css: str) -> dict[str, str]:
    """Custom properties declared in the :root blocks of `css`."""
    found: dict[str, str] = {}
    for body in re.findall(r":root\s*\{([^}]*)\}", css):
        found.update((name, value.strip()) for name, value in re.findall(r"(--[a-z0-9-]+)\s*:\s*([^;]+);", body))
    return found


def parse_stylesheet(css: str) -> Stylesheet:
    """charts.css text -> Stylesheet."""
    top, media = split_media(strip_comments(css))
    light = read_variables(top)
    dark = light | read_variables(media.get("(prefers-color-scheme: dark)", ""))
    rules, root = [], ()
    for order, (selector_text, body) in enumerate(re.findall(r"([^{}]+)\{([^{}]*)\}", top)):
        declarations = tuple((prop.strip(), value.strip()) for prop, value in
                             re.findall(r"([a-z-]+)\s*:\s*([^;]+);?", body))
        selectors = [" ".join(s.split()) for s in selector_text.split(",")]
        if selectors == ["svg.tm-chart"]:
            root = declarations
            continue
        sets = tuple(frozenset(re.findall(r"\.([a-z0-9-]+)", s.removeprefix(".tm-chart ")))
                     for s in selectors if s.startswith(".tm-chart "))
        if sets:
            rules.append(Rule(sets, declarations, order))
    return Stylesheet({"light": light, "dark": dark}, tuple(rules), root)


@lru_cache(maxsize=1)
def load_stylesheet() -> Stylesheet:
    """static/charts.css, parsed once."""
    return parse_stylesheet(CHARTS_CSS.read_text(encoding="utf-8"))
