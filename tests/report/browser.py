"""Headless Chromium for tests: load a page from file://, return its DOM after scripts ran and its console lines."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
CONSOLE = re.compile(r":CONSOLE[:(]\d*\)?\]?\s*(.*)")


def find_browser() -> str | None:
    return next((found for name in BROWSERS if (found := shutil.which(name))), None)


@dataclass
class Rendered:
    dom: str
    console: list[str]


def _flags(browser: str, profile: Path) -> list[str]:
    return [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--no-first-run",
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
        "--window-size=1280,900",
    ]


def render(page: Path, work: Path) -> Rendered:
    """The DOM after load and every console message the page produced (errors, uncaught exceptions)."""
    browser = find_browser()
    assert browser, "no chromium"
    done = subprocess.run(
        [*_flags(browser, work / "profile"), "--virtual-time-budget=5000", "--dump-dom", page.resolve().as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"chromium failed ({done.returncode}): {done.stderr[-2000:]}"
    console = [m.group(1) for line in done.stderr.splitlines() if (m := CONSOLE.search(line))]
    return Rendered(done.stdout, console)


def screenshot(page: Path, work: Path, target: Path, height: int) -> Path:
    browser = find_browser()
    assert browser, "no chromium"
    flags = [f for f in _flags(browser, work / "profile-shot") if not f.startswith("--window-size")]
    done = subprocess.run(
        [*flags, f"--window-size=1280,{height}", f"--screenshot={target}", page.resolve().as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and target.exists(), f"screenshot failed: {done.stderr[-2000:]}"
    return target
