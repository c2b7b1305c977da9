"""The widget scripts carry no model knowledge (issue 14: "A test fails when a script under static/ holds a numeric
literal other than 0, 1, 2, 10, 100, SI powers and UI timings, or a memory part name"). Every number a widget needs
(ranges, margins, layout, dtype sizes, policies) comes from Python in the widget's data; the scripts hold controls,
formatting and DOM updates.

Allowed beyond 0, 1, 2, 10 and 100: powers of 1000 and of 1024 (units), 2 ** 30 (a GiB), 300 (ms: the URL is written
300 ms after the last change), the digits given to toFixed or fixedText (formatting), and the few literals below, each
named with why it is not model knowledge. A new literal anywhere else fails.
"""

from __future__ import annotations

import re
from pathlib import Path

from builder.model.partnames import PART_NAMES
from builder.catalog import default_gpus, default_models
from builder.widgets.calculator import form_groups

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "static").rglob("*.js"))
ALLOWED = {"0", "1", "2", "10", "100", "1000", "1024", "1e3", "1e6", "1e9", "1e12", "1e15", "300"}
# (file, the code around it, the literal): why it is there.
EXEMPT = {
    ("99-boot.js", "let level = 7", "7"): "HTML heading levels (h2-h6) the embed view keeps for screen readers",
}
NUMBER = re.compile(r"(?<![\w$.])(\d+(?:\.\d+)?(?:e\d+)?)(?![\w$.])")


REGEX_AFTER = set("(,=:[!&|?{};+-*%<>~^")


def tokens(text: str) -> tuple[str, list[str]]:
    """(the code with every comment, string and regular expression blanked to a space, the strings' contents):
    a small scanner of JavaScript's lexical grammar, template literals' ${...} included."""
    code, strings, i, depth = [], [], 0, []  # depth: brace counts of the template literals we are inside
    while i < len(text):
        c, rest = text[i], text[i:i + 2]
        if rest == "//":
            i = text.find("\n", i)
            i = len(text) if i < 0 else i
            continue
        if rest == "/*":
            end = text.index("*/", i) + 2
            code.append("\n" * text.count("\n", i, end))
            i = end
            continue
        if c in "\"'" or c == "`" or (c == "}" and depth and depth[-1] == 0):
            if c == "}":  # back into a template literal after its ${...}
                depth.pop()
                c = "`"
            j, body = i + 1, []
            while j < len(text) and text[j] != c:
                if text[j] == "\\":
                    body.append(text[j:j + 2])
                    j += 2
                    continue
                if c == "`" and text.startswith("${", j):
                    break
                body.append(text[j])
                j += 1
            strings.append("".join(body))
            code.append(" " + "\n" * "".join(body).count("\n"))
            if c == "`" and text.startswith("${", j):
                depth.append(0)
                i = j + 2
            else:
                i = j + 1
            continue
        if c == "/":
            before = "".join(code).rstrip()[-1:]
            if not before or before in REGEX_AFTER or "".join(code).rstrip().endswith("return"):
                j, in_class = i + 1, False
                while text[j] != "/" or in_class:
                    in_class = (in_class or text[j] == "[") and text[j] != "]"
                    j += 2 if text[j] == "\\" else 1
                while j + 1 < len(text) and text[j + 1].isalpha():
                    j += 1
                code.append(" ")
                i = j + 1
                continue
        if depth and c in "{}":
            depth[-1] += 1 if c == "{" else -1
        code.append(c)
        i += 1
    return "".join(code), strings


def code_of(text: str) -> str:
    """The script without comments, strings, regular expressions and the digits given to toFixed and fixedText
    (01-rules.js: toFixed with Python's ties to even)."""
    code = re.sub(r"toFixed\(\d\)", "toFixed()", tokens(text)[0])
    return re.sub(r"fixedText\(([^()]*), \d\)", r"fixedText(\1, )", code)


def exempt_spans(name: str, text: str) -> list[tuple[int, int, str]]:
    return [(m.start(), m.end(), literal) for (file, snippet, literal) in EXEMPT if file == name
            for m in re.finditer(re.escape(snippet), text)]


def test_scripts_hold_no_number_of_their_own():
    found = []
    for path in SCRIPTS:
        code = code_of(path.read_text(encoding="utf-8"))
        code = code.replace("2 ** 30", "GiB")  # the binary unit itself
        spans = exempt_spans(path.name, code)
        for match in NUMBER.finditer(code):
            value = match.group(1)
            if value in ALLOWED or any(a <= match.start() < b and value == lit for a, b, lit in spans):
                continue
            line = code.count("\n", 0, match.start()) + 1
            found.append(f"{path.relative_to(ROOT)}:{line}: {value}")
    assert found == []


def test_every_exemption_is_still_needed():
    for file, snippet, literal in EXEMPT:
        text = code_of((ROOT / "static" / "widgets" / file).read_text(encoding="utf-8"))
        assert snippet in text and literal in snippet, (file, snippet)


def test_scripts_name_no_memory_part():
    """A part's name (builder.model.partnames) never appears as a string in a script: the scripts show the names
    Python sends (the calculator's `names`). The calculator's own control keys (such as `overhead`, a form field)
    are the form's words, not parts."""
    gpus = [(key, gpu.display, gpu.usable_bytes) for key, gpu in default_gpus().items()]
    controls = {c.key for _, _, group in form_groups(gpus, default_models()) for c in group}
    parts = (set(PART_NAMES) | {name.split("/")[0] for name in PART_NAMES}) - controls
    found = []
    for path in SCRIPTS:
        found += [f"{path.relative_to(ROOT)}: {text!r}" for text in tokens(path.read_text(encoding="utf-8"))[1]
                  if text in parts]
    assert found == []
