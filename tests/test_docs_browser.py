"""The documentation site as a reader sees it (issue 60): built with mkdocs and opened in headless Chromium, the
home page, a how-to and the results pages load every image and nothing runs wider than the window."""

import functools
import http.server
import importlib.util
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
PAGES = (
    "index.html",
    "how-to/train-on-gpus/index.html",
    "faq/index.html",
    "results/index.html",
    "results/rank-checks/index.html",
    "explanation/benchmarks/index.html",
    "explanation/latency/index.html",
    "results/comparisons/index.html",
    "results/studies/search-vs-random/index.html",
    "results/studies/searched-vs-published/index.html",
)
# The results pages draw their evidence: at least these many images each.
PICTURES = {
    "results/comparisons/index.html": 24,
    "results/rank-checks/index.html": 1,
    "explanation/benchmarks/index.html": 2,
    "explanation/latency/index.html": 1,
    "results/studies/search-vs-random/index.html": 1,
    "results/studies/searched-vs-published/index.html": 1,
}


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (CI installs it)")
@pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("mkdocs", "material", "playwright")),
    reason="mkdocs, mkdocs-material and playwright are dev dependencies (pip install -e .[dev])",
)
def test_the_site_shows_its_pictures_and_fits_the_window_in_chromium(tmp_path):
    from playwright.sync_api import sync_playwright

    site = tmp_path / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--config-file", "mkdocs.yml", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    args = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
    # Served over HTTP, as a reader gets it (the site's search index does not load from file:// URLs).
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    with server, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=args)
        try:
            for width in (1280, 390):  # a laptop and a phone
                page = browser.new_page(viewport={"width": width, "height": 900})
                for name in PAGES:
                    errors = []
                    page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
                    page.goto(base + name)
                    page.wait_for_load_state("load")
                    images = page.evaluate(
                        "Array.from(document.querySelectorAll('article img'))"
                        ".map(i => [i.getAttribute('src'), i.complete, i.naturalWidth])"
                    )
                    broken = [src for src, done, natural in images if not (done and natural > 0)]
                    assert not broken, (name, broken)
                    assert len(images) >= PICTURES.get(name, 0), (name, len(images))
                    wide = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
                    assert wide <= 1, f"{name} at {width} px runs {wide} px wider than the window"
                    assert not errors, (name, errors)
                page.close()
        finally:
            browser.close()
            server.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # no request log on stderr
        pass
