"""A small Chrome DevTools Protocol driver for tests: headless Chromium from the system, driven over its
debugging websocket (the ``websockets`` package fae already installs), so a test can load a page, click an
element as a user would (a real mouse press at its centre), read the DOM and take screenshots.

No browser is downloaded: it runs the distribution's ``chromium`` (Debian package ``chromium``).
"""

from __future__ import annotations

import base64
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
from websockets.sync.client import connect

from tests.report.browser import find_browser

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--remote-debugging-port=0",
)


class Chromium:
    """One headless browser with one page; ``console`` and ``dialogs`` collect what the pages said."""

    def __init__(self, profile: Path, timeout: float = 60):
        browser = find_browser()
        assert browser, "no chromium"
        self.timeout = timeout
        self.process = subprocess.Popen(
            [browser, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while not (port_file.exists() and port_file.read_text().strip()):
            assert self.process.poll() is None, f"chromium exited with {self.process.returncode}"
            assert time.monotonic() < deadline, "chromium did not open its debugging port"
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        pages = [t for t in httpx.get(f"http://127.0.0.1:{port}/json/list").json() if t["type"] == "page"]
        self.socket = connect(pages[0]["webSocketDebuggerUrl"], max_size=None, open_timeout=timeout).__enter__()
        self.next_id = 0
        self.events: list[dict[str, Any]] = []
        self.console: list[str] = []
        self.dialogs: list[str] = []
        self.call("Page.enable")
        self.call("Runtime.enable")

    def _record(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        params = message.get("params", {})
        if method == "Runtime.consoleAPICalled":
            self.console.append(" ".join(str(a.get("value", a.get("description"))) for a in params.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            self.console.append(str(params["exceptionDetails"].get("exception", {}).get("description")))
        elif method == "Log.entryAdded":
            self.console.append(params["entry"].get("text", ""))
        elif method == "Page.javascriptDialogOpening":
            self.dialogs.append(params.get("message", ""))
            self.call("Page.handleJavaScriptDialog", accept=False)
        self.events.append(message)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        sent = self.next_id
        self.socket.send(json.dumps({"id": sent, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv(timeout=self.timeout))
            if message.get("id") == sent:
                assert "error" not in message, f"{method}: {message['error']}"
                return message.get("result", {})
            self._record(message)

    def wait_for(self, method: str) -> dict[str, Any]:
        """The next event named ``method`` (one already received since the last wait counts)."""
        for index, message in enumerate(self.events):
            if message.get("method") == method:
                del self.events[: index + 1]
                return message
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            message = json.loads(self.socket.recv(timeout=self.timeout))
            self._record(message)
            if message.get("method") == method:
                self.events.clear()
                return message
        raise AssertionError(f"no {method} within {self.timeout} s")

    def open(self, url: str) -> None:
        self.events.clear()
        self.call("Page.navigate", url=url)
        self.wait_for("Page.loadEventFired")

    def value(self, expression: str) -> Any:
        found = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        assert "exceptionDetails" not in found, found["exceptionDetails"]
        return found["result"].get("value")

    def click(self, selector: str) -> None:
        """Press and release the left mouse button at the centre of the first element ``selector`` finds (of its
        first line box: a link that wraps has a gap in the middle of its bounding box), and wait for the page
        it leads to."""
        # a page takes input only once it has drawn a frame: a screenshot makes it draw one now
        self.call("Page.captureScreenshot", format="png", clip={"x": 0, "y": 0, "width": 1, "height": 1, "scale": 1})
        box = self.value(
            f"(() => {{const e = document.querySelector({json.dumps(selector)}); if (!e) return null;"
            " e.scrollIntoView({block: 'center'}); const r = e.getClientRects()[0];"
            " return [r.left + r.width / 2, r.top + r.height / 2];})()"
        )
        assert box, f"nothing matches {selector}"
        self.events.clear()
        self.call("Input.dispatchMouseEvent", type="mouseMoved", x=box[0], y=box[1])
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=1)
        try:
            self.wait_for("Page.loadEventFired")
        except (AssertionError, TimeoutError):
            found = self.value(f"document.querySelector({json.dumps(selector)}).outerHTML")
            raise AssertionError(f"a click on {found} at {box} led nowhere; at {self.value('location.href')}") from None

    def screenshot(self, target: Path, width: int, most: int = 2400) -> Path:
        """The page at ``width`` CSS pixels, as tall as its content up to ``most``, as a PNG."""
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=900, deviceScaleFactor=1, mobile=False)
        height = min(most, int(self.value("document.documentElement.scrollHeight")))
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
        shot = self.call("Page.captureScreenshot", format="png")
        target.write_bytes(base64.b64decode(shot["data"]))
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=900, deviceScaleFactor=1, mobile=False)
        return target

    def close(self) -> None:
        self.socket.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
