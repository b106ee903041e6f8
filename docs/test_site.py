"""Checks of the built documentation site, as a person would look at it (CI runs this after the
build, ``.ci/run``): every public name has its reference page, every internal link and anchor
resolves, and the home page, ``SparseMTL``'s page and a gallery example render in a real headless
Chromium with their figures.  Screenshots go to ``docs/_build/screenshots/``.

    python -m sphinx -W --keep-going -b html docs docs/_build/html
    python -m pytest -q -n 0 docs/test_site.py
    python docs/test_site.py          # lists the public names without a page (exit 1 if any)

``MTL_OPT_DOCS_HTML`` points to another build; ``CHROMIUM`` to another browser binary.
"""

from __future__ import annotations

import importlib
import os
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

HERE = Path(__file__).resolve().parent
HTML = Path(os.environ.get("MTL_OPT_DOCS_HTML", HERE / "_build" / "html"))
SCREENSHOTS = HERE / "_build" / "screenshots"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
#: The modules whose ``__all__`` is public API besides ``mtl_opt`` itself.
PUBLIC_MODULES = ("mtl_opt.datasets", "mtl_opt.synthetic", "mtl_opt.metrics", "mtl_opt.plotting",
                  "mtl_opt.bandits", "mtl_opt.collab")
#: Pages looked at in the browser: (name of the screenshot, page, what it must show).
LOOKED_AT = [("home", "index.html", "certified optimality gap"),
             ("api_SparseMTL", "api/generated/mtl_opt.SparseMTL.html", "lambda_zbar"),
             ("gallery_exact_fit", "auto_examples/plot_exact_fit_progress.html", "lower bound")]


def public_names() -> list[str]:
    """Every public name, fully qualified: ``mtl_opt.__all__`` and each public module's."""
    names = [f"mtl_opt.{name}" for name in importlib.import_module("mtl_opt").__all__]
    for module in PUBLIC_MODULES:
        names += [f"{module}.{name}" for name in importlib.import_module(module).__all__]
    return names


def missing_pages(html: Path = HTML) -> list[str]:
    """The public names without a reference page in the build at ``html``."""
    return [name for name in public_names() if not (html / "api" / "generated" / f"{name}.html").is_file()]


class _Links(HTMLParser):
    """The ``href`` / ``src`` targets and the element ids of one page."""

    def __init__(self):
        super().__init__()
        self.targets, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        for key, value in attrs:
            if key == "id" and value:
                self.ids.add(value)
            elif key in ("href", "src") and value and tag in ("a", "img", "link", "script"):
                self.targets.append(value)


def _parsed(page: Path) -> _Links:
    links = _Links()
    links.feed(page.read_text(encoding="utf-8"))
    return links


@pytest.fixture(scope="module")
def html() -> Path:
    if not (HTML / "index.html").is_file():
        pytest.fail(f"no built site at {HTML}: build it first with "
                    "`python -m sphinx -W --keep-going -b html docs docs/_build/html`")
    return HTML


def test_every_public_name_has_a_reference_page(html):
    assert not missing_pages(html), f"public names without a page: {missing_pages(html)}"


def test_every_internal_link_and_anchor_resolves(html):
    pages = sorted(html.rglob("*.html"))
    assert len(pages) > 50
    ids = {}
    broken = []
    for page in pages:
        for target in _parsed(page).targets:
            parts = urlsplit(target)
            if parts.scheme or parts.netloc or target.startswith(("mailto:", "javascript:", "data:")):
                continue
            file = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if file.is_dir():
                file = file / "index.html"
            if not file.exists():
                broken.append(f"{page.relative_to(html)} -> {target}")
            elif parts.fragment and file.suffix == ".html":
                if file not in ids:
                    ids[file] = _parsed(file).ids
                if unquote(parts.fragment) not in ids[file]:
                    broken.append(f"{page.relative_to(html)} -> {target} (no such anchor)")
    assert not broken, "\n".join(broken[:50])


def test_pages_render_with_their_figures_in_a_real_browser(html):
    from playwright.sync_api import sync_playwright   # the docs extra

    assert Path(CHROMIUM).exists(), f"no Chromium at {CHROMIUM} (apt-get install chromium, or set CHROMIUM)"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    args = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run"]   # this machine's network is closed: no background calls
    with sync_playwright() as run:
        browser = run.chromium.launch(executable_path=CHROMIUM, args=args)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        failed = []
        page.on("requestfailed", lambda request: failed.append(request.url))
        for name, path, text in LOOKED_AT:
            page.goto((html / path).as_uri(), wait_until="load")
            body = page.inner_text("article")
            assert text in body, f"{path}: '{text}' not on the page"
            images = page.eval_on_selector_all(
                "article img", "imgs => imgs.map(i => [i.getAttribute('src'), i.complete && i.naturalWidth])")
            assert all(width for _, width in images), f"{path}: images not drawn: {images}"
            if name.startswith("gallery"):
                figures = [src for src, _ in images if "sphx_glr" in (src or "")]
                assert figures, f"{path}: no rendered figure"
                page.locator("article img.sphx-glr-single-img, article img.sphx-glr-multi-img").first.scroll_into_view_if_needed()
            hrefs = page.eval_on_selector_all("article a[href]", "links => links.map(a => a.href)")
            assert hrefs, f"{path}: no links"
            page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=False)
        assert not failed, f"resources that did not load: {failed}"
        browser.close()


if __name__ == "__main__":
    missing = missing_pages()
    print("\n".join(missing) if missing else f"every public name ({len(public_names())}) has a page")
    sys.exit(1 if missing else 0)
