"""Headless Chromium for the browser tests (selenium): where it is, and a driver that always quits.

A test skips (with the reason shown) only where Chromium or its driver is not installed.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
DRIVER = shutil.which("chromedriver")
NO_BROWSER = "Chromium is not installed (Debian: apt-get install -y chromium chromium-driver)"
_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
          "--disable-background-networking", "--disable-component-update", "--disable-sync",
          "--disable-dev-shm-usage", "--window-size=1280,900")


@contextmanager
def chromium(profile: Path) -> Iterator[Any]:
    """A headless Chromium driver with its profile in ``profile``, collecting the browser's console log."""
    if CHROMIUM is None or DRIVER is None:
        pytest.skip(NO_BROWSER)
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*_FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
