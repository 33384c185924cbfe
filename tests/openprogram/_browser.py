"""What the browser tests share: `openprogram view` started as a user starts it (and a
plain HTTP client of it), Debian's chromium driven by Playwright (never a browser of
Playwright's own), and screenshots."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.cookiejar import CookieJar
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def missing() -> str:
    """Why no browser test can run here ("" when one can)."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[dev]')"
    if not CHROMIUM.exists():
        return f"no browser at {CHROMIUM} (apt-get install chromium)"
    return ""


@contextmanager
def chromium() -> Iterator[Any]:
    """A launched chromium; skipped where there is none, and a failure under CI=true."""
    reason = missing()
    if reason:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            yield launched
        finally:
            launched.close()


@contextmanager
def viewer(db: str | Path, *flags: str) -> Iterator[str]:
    """`openprogram view --db DB --port 0 --no-open [flags]`: the URL it prints."""
    process = subprocess.Popen(
        [sys.executable, "-c", "from openprogram.cli import run; run()", "view",
         "--db", str(db), "--port", "0", "--no-open", *flags],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert process.stdout is not None and process.stderr is not None
    line = process.stdout.readline().strip()
    try:
        assert line.startswith("http://127.0.0.1:") and "?token=" in line, line
        yield line
    finally:
        process.terminate()
        process.wait(timeout=30)
        process.stdout.close()
        process.stderr.close()


@contextmanager
def served(path: str | Path, *flags: str) -> Iterator[Callable[..., tuple[int, str, Any]]]:
    """`openprogram view` in a process of its own, and a client that opened the URL it
    printed (so it holds the cookie): ``fetch(path, form=None)`` gives status, body, headers."""
    with viewer(path, *flags) as line:
        base = line.split("/?token=")[0]
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()))
        opener.open(line, timeout=30).read()

        def fetch(where: str, form: dict[str, str] | None = None) -> tuple[int, str, Any]:
            data = urllib.parse.urlencode(form).encode() if form is not None else None
            try:
                with opener.open(base + where, data=data, timeout=30) as answer:
                    return answer.status, answer.read().decode(), answer.headers
            except urllib.error.HTTPError as error:
                return error.code, error.read().decode(), error.headers

        yield fetch


def shot(page: Any, name: str) -> None:
    """A screenshot into ``$OPENPROGRAM_VIEW_SCREENSHOTS`` (the README's docs/viewer)."""
    folder = os.environ.get("OPENPROGRAM_VIEW_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        target = Path(folder) / f"{name}.png"
        page.screenshot(path=str(target))
        from PIL import Image  # a palette of 128 colors: a fourth of the bytes

        with Image.open(target) as image:
            image.convert("RGB").quantize(128).save(target, optimize=True)
