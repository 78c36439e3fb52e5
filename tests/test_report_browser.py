"""``nas report`` in a real headless browser, with the runs' numbers."""

import json
import shutil
from pathlib import Path

import pytest

from nas.cli import main

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (CI installs it)")
def test_report_pages_load_in_a_headless_browser_with_the_runs_numbers(pipeline, tmp_path):
    from playwright.sync_api import sync_playwright

    pages = {}
    for kind, run in pipeline.items():
        out = tmp_path / f"{kind}.html"
        assert main(["report", str(run), "--out", str(out)]) == 0
        pages[kind] = out
    args = [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=args)
        try:
            for kind, path in pages.items():
                page = browser.new_page()
                errors, requests = [], []
                page.on("console", lambda m, errors=errors: errors.append(m.text) if m.type == "error" else None)
                page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
                page.on("request", lambda r, requests=requests: requests.append(r.url))
                page.goto(path.as_uri())
                page.wait_for_load_state("load")
                assert errors == [], (kind, errors)
                assert all(url.startswith(("file:", "data:")) for url in requests), requests  # no network
                images = page.evaluate("Array.from(document.images).map(i => [i.complete, i.naturalWidth])")
                assert images and all(done and width > 0 for done, width in images), (kind, images)
                cells = page.evaluate(
                    "Array.from(document.querySelectorAll('[data-value]'))"
                    ".map(e => [e.dataset.key, JSON.parse(e.dataset.value), e.textContent])"
                )
                _check_numbers(kind, pipeline[kind], cells)
                page.close()
        finally:
            browser.close()


def _check_numbers(kind: str, run: Path, cells: list) -> None:
    shown = {}
    for key, value, text in cells:
        shown.setdefault(key, []).append((value, text))
    if kind == "compare":
        result = json.loads((run / "result.json").read_text())
        assert [v for v, _ in shown["top1"]] == [r["top1"] for r in result["rows"]]
        assert [t for _, t in shown["top1"]] == [f"{100 * r['top1']:.2f}" for r in result["rows"]]
        assert [t for _, t in shown["latency_ms"]] == [f"{r['latency_ms']:.3f}" for r in result["rows"]]
        assert shown["summary.random_top1_mean"][0][0] == result["summary"]["random_top1_mean"]
    elif kind == "search":
        steps = [json.loads(line) for line in (run / "search.jsonl").read_text().splitlines()]
        assert [v for v, _ in shown["accuracy"]] == [s["accuracy"] for s in steps]
        assert [t for _, t in shown["mes"]] == [f"{s['mes']:.1f}" for s in steps]
        result = json.loads((run / "result.json").read_text())
        assert shown["result.mes"][0][0] == result["mes"]
    else:
        result = json.loads((run / "result.json").read_text())
        assert shown["result.largest_top1"][0] == (result["largest_top1"], f"{100 * result['largest_top1']:.2f}")
        last = [
            json.loads(line)
            for line in (run / "metrics.jsonl").read_text().splitlines()
            if "loss" in line and '"final"' not in line
        ][-1]
        assert shown["last.loss"][0][0] == last["loss"]


def test_report_of_a_folder_that_is_no_run(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert "not a run folder of nas" in capsys.readouterr().err
