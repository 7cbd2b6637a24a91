"""Drive headless Chromium over the DevTools protocol on a pipe: no extra package, no network port.

``--remote-debugging-pipe`` makes Chromium read commands on fd 3 and write replies and events on
fd 4, each a JSON message ended by a NUL byte.  That is all a test needs to load a page, hear every
console message, exception, log entry (CSP violations, failed loads) and network request, read the
DOM and take a screenshot.
"""

from __future__ import annotations

import base64
import dataclasses
import fcntl
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["Chromium", "PageLoad", "find_chromium"]

_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--disable-extensions",
    "--mute-audio",
    "--remote-debugging-pipe",
]


#: Run in a small Python process: put the pipe ends on fds 3 and 4, then become Chromium.
_WIRE_AND_EXEC = (
    "import os, sys; os.dup2(int(sys.argv[1]), 3); os.dup2(int(sys.argv[2]), 4); os.execv(sys.argv[3], sys.argv[3:])"
)


def find_chromium() -> str | None:
    """The Chromium executable (Debian's ``chromium``), or ``None``."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclasses.dataclass
class PageLoad:
    """What happened while a page loaded."""

    console: list[dict[str, Any]]
    exceptions: list[dict[str, Any]]
    log: list[dict[str, Any]]
    requests: list[str]
    dialogs: list[str]

    @property
    def problems(self) -> list[str]:
        """Console errors and warnings, uncaught exceptions, logged errors, dialogs: all bad."""
        found = [
            f"console.{m['type']}: {_text(m)}" for m in self.console if m["type"] in ("error", "warning", "assert")
        ]
        found += [f"exception: {e.get('exception', {}).get('description') or e.get('text')}" for e in self.exceptions]
        found += [
            f"log {e['level']}: {e['text']} ({e.get('url', '')})"
            for e in self.log
            if e["level"] in ("error", "warning")
        ]
        found += [f"dialog: {d}" for d in self.dialogs]
        return found


class Chromium:
    """One headless Chromium with one page; use as a context manager."""

    def __init__(self, executable: str, *, width: int = 1280, height: int = 900, timeout: float = 30.0) -> None:
        self._timeout = timeout
        self._profile = tempfile.TemporaryDirectory(prefix="specverify-chromium-")
        to_browser_r, to_browser_w = os.pipe()
        from_browser_r, from_browser_w = os.pipe()
        # The browser's ends, moved above 9 so that putting them on fds 3 and 4 cannot clobber them.
        child_r, child_w = (fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_browser_r, from_browser_w))
        for fd in (to_browser_r, from_browser_w):
            os.close(fd)
        command = [
            executable,
            *_FLAGS,
            f"--user-data-dir={self._profile.name}",
            f"--window-size={width},{height}",
            "about:blank",
        ]
        self._log = Path(self._profile.name) / "chromium.log"
        with self._log.open("wb") as log:
            self._process = subprocess.Popen(
                [sys.executable, "-c", _WIRE_AND_EXEC, str(child_r), str(child_w), *command],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                pass_fds=(child_r, child_w),
            )
        os.close(child_r)
        os.close(child_w)
        self._out, self._in = to_browser_w, from_browser_r
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict[str, Any]] = []
        try:
            target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        except (OSError, RuntimeError, TimeoutError) as exc:
            tail = self._log.read_text(errors="replace").strip().splitlines()[-15:]
            self.close()
            raise RuntimeError(f"Chromium did not start: {exc}\n" + "\n".join(tail)) from exc
        self._session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable", session=True)
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=True,
        )

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except (OSError, TimeoutError, RuntimeError):
            pass
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        for fd in (self._out, self._in):
            try:
                os.close(fd)
            except OSError:
                pass
        self._profile.cleanup()

    def send(self, method: str, params: dict[str, Any] | None = None, *, session: bool = False) -> dict[str, Any]:
        """Send one command and wait for its reply; events that arrive meanwhile are kept."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self._session
        os.write(self._out, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self._timeout
        while True:
            reply = self._receive(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self._events.append(reply)

    def load(self, path: str | Path, *, dark: bool = False, settle: float = 0.5) -> PageLoad:
        """Open a local file, wait for its load event and a quiet moment, and report what happened."""
        scheme = "dark" if dark else "light"
        self.send(
            "Emulation.setEmulatedMedia",
            {"features": [{"name": "prefers-color-scheme", "value": scheme}]},
            session=True,
        )
        self._events.clear()
        self.send("Page.navigate", {"url": Path(path).resolve().as_uri()}, session=True)
        deadline = time.monotonic() + self._timeout
        while not any(e.get("method") == "Page.loadEventFired" for e in self._events):
            self._events.append(self._receive(deadline))
        return self.settle(settle)

    def settle(self, seconds: float = 0.5) -> PageLoad:
        """Listen until ``seconds`` pass quietly; report everything heard since the last load."""
        quiet_until = time.monotonic() + seconds
        while True:
            try:
                self._events.append(self._receive(quiet_until))
            except TimeoutError:
                break
        events = [e for e in self._events if "method" in e]
        for event in events:  # a dialog would block the page: dismiss it (and count it)
            if event["method"] == "Page.javascriptDialogOpening" and not event.get("handled"):
                event["handled"] = True
                self.send("Page.handleJavaScriptDialog", {"accept": False}, session=True)
        params = {name: [e["params"] for e in events if e["method"] == name] for name in {e["method"] for e in events}}
        return PageLoad(
            console=params.get("Runtime.consoleAPICalled", []),
            exceptions=[p["exceptionDetails"] for p in params.get("Runtime.exceptionThrown", [])],
            log=[p["entry"] for p in params.get("Log.entryAdded", [])],
            requests=[p["request"]["url"] for p in params.get("Network.requestWillBeSent", [])],
            dialogs=[p["message"] for p in params.get("Page.javascriptDialogOpening", [])],
        )

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (JSON-serialisable values only)."""
        reply = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=True)
        if "exceptionDetails" in reply:
            raise RuntimeError(f"evaluate {expression!r}: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def screenshot(self, path: str | Path, *, full_page: bool = False, element: str | None = None) -> None:
        """A PNG of the viewport (what a reader sees first), of the whole page, or of the first
        element matching the CSS selector ``element``."""
        params: dict[str, Any] = {"format": "png"}
        if element is not None:
            box = self.evaluate(
                f"(() => {{ const r = document.querySelector({json.dumps(element)}).getBoundingClientRect();"
                " return [r.left + window.scrollX, r.top + window.scrollY, r.width, r.height]; })()"
            )
            params.update(
                captureBeyondViewport=True,
                clip={"x": box[0], "y": box[1], "width": box[2], "height": box[3], "scale": 1},
            )
        elif full_page:
            size = self.send("Page.getLayoutMetrics", session=True)["cssContentSize"]
            params.update(
                captureBeyondViewport=True,
                clip={"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1},
            )
        data = self.send("Page.captureScreenshot", params, session=True)["data"]
        Path(path).write_bytes(base64.b64decode(data))

    def _receive(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no message from Chromium in time")
            ready, _, _ = select.select([self._in], [], [], remaining)
            if ready:
                chunk = os.read(self._in, 1 << 20)
                if not chunk:
                    raise RuntimeError("Chromium closed the DevTools pipe (did it crash?)")
                self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)


def _text(message: dict[str, Any]) -> str:
    return " ".join(str(a.get("value", a.get("description", ""))) for a in message.get("args", []))
