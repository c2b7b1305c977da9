"""Screenshots of three pages at 390 and 1280 px, light and dark, into docs/screenshots/ (issue 18's evidence that
charts fit and stay legible). Build the site first (`make site`), then run: .venv/bin/python docs/make_screenshots.py"""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import sync_playwright

from tests.browser_setup import find_chromium

ROOT = Path(__file__).resolve().parent.parent
SITE, OUT = ROOT / "site", ROOT / "docs" / "screenshots"
# Each page, and what the screenshot starts at.
PAGES = {"overview": ("index.html", "[data-widget=bytes-per-param]"), "activations": ("activations.html", "#chart-offload"),
         "calculator": ("calculator.html", "[data-widget=calculator] [data-out=result]")}
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync"]


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(find_chromium()), args=ARGS)
        for scheme in ("light", "dark"):
            for width, height in ((390, 844), (1280, 800)):
                context = browser.new_context(viewport={"width": width, "height": height}, color_scheme=scheme)
                page = context.new_page()
                for name, (path, start) in PAGES.items():
                    page.goto((SITE / path).as_uri())
                    page.locator(start).first.evaluate("e => e.scrollIntoView({block: 'start'})")
                    page.evaluate("window.scrollBy(0, -40)")
                    page.screenshot(path=str(OUT / f"{name}-{width}-{scheme}.png"), animations="disabled")
                context.close()
        browser.close()


if __name__ == "__main__":
    main()
