"""The documentation site (``make site``, pkgdown into docs/) as a browser shows it: headless Chromium opens every
reference page and article, each renders its content without R errors, every local link and image resolves,
and every exported R function has a page listed in the reference index.

Run by ``make test-site`` after building the site; skipped when docs/ has not been built or Chromium is missing.
Scripts the site loads from CDNs cannot load on a machine without a network, so the browser's console is not
judged; what a reader sees is.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "docs"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = [
    pytest.mark.skipif(not (SITE / "index.html").exists(), reason="the site is built by `make site`"),
    pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (`make test-site` installs it)"),
]

BROWSER = [CHROMIUM or "chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
           "--virtual-time-budget=3000"]


def rendered(page: Path) -> str:
    """The page's DOM after its scripts ran, as Chromium dumps it."""
    done = subprocess.run([*BROWSER, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def exports() -> list[str]:
    """The R package's exported functions, from NAMESPACE."""
    text = (ROOT / "NAMESPACE").read_text()
    return [name.strip('"') for name in re.findall(r"^export\(([^)]+)\)", text, re.MULTILINE)]


def topic_of() -> dict[str, str]:
    """Alias -> the reference page (topic file name) that documents it, from man/*.Rd."""
    topics = {}
    for rd in (ROOT / "man").glob("*.Rd"):
        for alias in re.findall(r"^\\alias\{(.+)\}$", rd.read_text(), re.MULTILINE):
            topics[alias.replace("\\%", "%")] = rd.stem
    return topics


def local_targets(page: Path, dom: str) -> list[Path]:
    """Files in the site that the page's links, images and scripts point at."""
    targets = []
    for ref in re.findall(r'(?:href|src)="([^"#?]+)', dom):
        ref = html.unescape(ref)
        parsed = urlparse(ref)
        if parsed.scheme not in ("", "file") or ref.startswith("//"):
            continue
        path = Path(unquote(parsed.path)) if parsed.scheme == "file" else (page.parent / unquote(ref))
        if parsed.scheme == "file" and SITE not in path.parents:
            continue  # a file of the machine, outside the site (pkgdown's local MathJax)
        targets.append(path)
    return targets


PAGES = sorted((SITE / "reference").glob("*.html")) + sorted((SITE / "articles").glob("*.html")) + [
    SITE / "index.html"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(SITE)) if SITE in p.parents else str(p))
def test_every_page_renders_its_content_without_errors(page):
    dom = rendered(page)
    title = re.search(r"<h1[^>]*>(.*?)</h1>", dom, re.DOTALL)
    assert title and re.sub(r"<[^>]+>", "", title.group(1)).strip(), f"{page} has no title"
    main = re.search(r'<main[^>]*>(.*)</main>', dom, re.DOTALL)
    assert main and len(re.sub(r"<[^>]+>", "", main.group(1)).strip()) > 100, f"{page} shows no content"
    for marker in ("#&gt; Error", "## Error", "Error in ", "Execution halted"):
        assert marker not in main.group(1), f"{page} shows an R error ({marker})"
    missing = [str(t) for t in local_targets(page, dom) if not t.exists()]
    assert not missing, f"{page} points at missing files: {missing}"


def test_every_exported_function_has_a_reference_page_listed_in_the_index():
    topics = topic_of()
    index = (SITE / "reference" / "index.html").read_text()
    for name in exports():
        assert name in topics, f"{name} is exported but documented in no man/*.Rd"
        page = SITE / "reference" / f"{topics[name]}.html"
        assert page.exists(), f"no reference page for {name}"
        assert f'href="{topics[name]}.html"' in index, f"the reference index does not list {name}"


def test_both_articles_are_there_with_their_figures():
    articles = {p.stem for p in (SITE / "articles").glob("*.html")}
    assert {"training-imagenet", "distributed-training"} <= articles
    dom = (SITE / "articles" / "training-imagenet.html").read_text()
    figures = re.findall(r'<img[^>]+src="([^"]+\.png)"', dom)
    assert figures and all((SITE / "articles" / f).exists() for f in figures), figures


def test_a_screenshot_of_the_home_page(tmp_path):
    shot = Path(os.environ.get("ALEXNET_SITE_SCREENSHOT", tmp_path / "home.png"))
    done = subprocess.run([*BROWSER, f"--screenshot={shot}", "--window-size=1280,1600", (SITE / "index.html").as_uri()],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 50_000
