"""The Exercises page: every page's exercises, by topic, each linking back to where it is asked.

The build renders this page after the others and hands it their answered exercises in
catalogs['exercises'] (builder/build.py); nothing is evaluated twice.
"""

from __future__ import annotations

from typing import Any


def context(options: dict[str, Any], catalogs: dict[str, Any]) -> dict[str, Any]:
    """Topics in page order, each with its exercises (Exercise, question HTML) and its page's URL."""
    topics = sorted(catalogs.get("exercises", []), key=lambda topic: (topic["page"].order, topic["page"].slug))
    return {"answers": catalogs.get("answers", True),
            "topics": [{"title": topic["page"].title, "url": topic["page"].url, "slug": topic["page"].slug,
                        "exercises": topic["exercises"]} for topic in topics]}
