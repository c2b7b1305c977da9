"""What a widget's select sends in the page (issue 14, page weight): its chosen option and those whose words only the
page has. The script (static/widgets/06-choices.js, fillChoices) adds the others before the control can be used, in
the order of the link's choices, each named as the widget's data names it (a catalog model, a GPU, an engine) or
else shown as its value; so once it runs a select offers every choice with the same words. A select the page shows
without JavaScript is disabled, or hidden, and shows its chosen option only."""

from __future__ import annotations

from typing import Collection


def sent(choices: tuple[tuple[str, str], ...], chosen: str, named: Collection[str] = ()) -> tuple[tuple[str, str], ...]:
    """The (value, words) pairs of `choices` the page sends: the chosen one, and those whose words differ from their
    value unless the script's data names them (`named`)."""
    return tuple((value, words) for value, words in choices
                 if value == chosen or (words != value and value not in named))
