"""Render a page in a real headless browser (Debian's chromium) and report what it did.

The browser is driven over the DevTools protocol on a pair of pipes
(``--remote-debugging-pipe``: it reads commands on fd 3 and writes answers on
fd 4, each message JSON ended by a NUL byte). No port is opened, so nothing
else on the machine can talk to it, and the protocol's network events name
every request the page attempts, including the ones the browser then refused
(a Content-Security-Policy block, an unresolvable host). As a second guard,
every host resolves to nothing (``--host-resolver-rules``) except 127.0.0.1,
so a page that names a remote host cannot reach it while a test can still
serve resources from a local server.

Frames from another site and workers run in processes of their own and
report through sessions of their own; the tab's session attaches to them
automatically, holding each until its network events are watched, so their
requests are reported too.

A page counts as settled once its load event fired, no request is open and
nothing happened for ``QUIET`` seconds; then the DOM and the text are read
and the screenshot is taken.

One browser can render many pages, one tab each (``Browser``); ``render`` is a
one-shot that starts and stops its own. The browser runs in a process group
of its own, which is killed whole when it stops. Its crash handler leaves the
group (it starts a session of its own), so any process that names the
browser's profile is killed too; HOME points into the profile, so the crash
handler's database path names it.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

#: The Debian package that provides the browser.
PACKAGE = "chromium"
BINARIES = ("chromium", "chromium-browser")

#: Bound for one page: navigation, scripts, outstanding requests, screenshot.
RENDER_TIMEOUT = 30.0
#: Bound for the browser to start and answer its first command.
START_TIMEOUT = 30.0
#: Bound for the browser's processes to be gone once killed.
STOP_TIMEOUT = 10.0
#: How long the network must stay quiet after the load event before the page
#: counts as settled (a script may start a request from a timer).
QUIET = 0.1

#: Schemes whose loads are not network requests.
LOCAL_SCHEMES = ("data:", "blob:", "about:")

FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-sync",
    "--disable-breakpad",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
    "--disable-features=Translate,OptimizationHints,MediaRouter,InterestFeedContentSuggestions",
    "--metrics-recording-only",
    "--no-pings",
    "--mute-audio",
    "--hide-scrollbars",
    "--force-color-profile=srgb",
    "--password-store=basic",
    "--use-mock-keychain",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
    "--remote-debugging-pipe",
)


class BrowserError(RuntimeError):
    """The browser failed, answered with an error, or took too long."""


class _NoAnswer(BrowserError):
    """Nothing came from the browser before a deadline."""


def find_chromium() -> str:
    """The browser's path; skips the test, naming the package, when there is none."""
    for name in BINARIES:
        path = shutil.which(name)
        if path:
            return path
    pytest.skip(
        f"NO HEADLESS BROWSER: none of {', '.join(BINARIES)} is on PATH; "
        f"install Debian's package: apt-get install -y {PACKAGE}"
    )


@dataclass
class Request:
    """One request the page attempted, and what became of it."""

    url: str
    method: str
    resource_type: str
    #: Why the browser refused it ("csp", "mixed-content", ...); None if it did not.
    blocked_reason: str | None = None
    #: The failure the browser reported ("net::ERR_NAME_NOT_RESOLVED", ...).
    error: str | None = None
    #: The HTTP status of the answer, if one came.
    status: int | None = None


@dataclass
class Rendered:
    """What a page did once loaded and settled."""

    #: The screenshot of the viewport (``width`` x ``height``).
    png: Path
    #: The document's HTML after its scripts ran.
    dom: str
    #: The text of the body as rendered (``innerText``).
    text: str
    #: Every request the page attempted except the load of the page itself and
    #: loads that never leave the browser (data:, blob:, about:).
    requests: list[Request]
    #: Console errors, uncaught exceptions and the browser's own error messages.
    console_errors: list[str]
    #: The browser's messages about Content-Security-Policy violations: blocked
    #: loads (also marked on their ``Request``), inline scripts and styles.
    csp_violations: list[str]
    width: int
    height: int
    #: What each of the ``evaluate`` expressions returned, in order.
    values: list[Any] = field(default_factory=list)

    @property
    def urls(self) -> list[str]:
        return [r.url for r in self.requests]


@dataclass
class _Session:
    """What one tab's events (and those of the frames and workers it started) have said."""

    page_url: str
    #: The tab's session and those of its out-of-process frames and workers.
    sessions: set[str] = field(default_factory=set)
    #: Child sessions attached but not yet set up.
    new_children: list[str] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    #: The latest request under each id (a redirect reuses the id).
    by_id: dict[str, Request] = field(default_factory=dict)
    pending: set[str] = field(default_factory=set)
    console_errors: list[str] = field(default_factory=list)
    csp_violations: list[str] = field(default_factory=list)
    loaded: bool = False
    last_activity: float = field(default_factory=time.monotonic)

    def on_event(self, method: str, params: dict[str, Any]) -> None:
        self.last_activity = time.monotonic()
        if method == "Network.requestWillBeSent":
            request = params["request"]
            url: str = request["url"]
            if url == self.page_url or url.startswith(LOCAL_SCHEMES):
                return
            rid: str = params["requestId"]
            seen = Request(url, request["method"], params.get("type", "Other"))
            self.requests.append(seen)
            self.by_id[rid] = seen
            self.pending.add(rid)
        elif method == "Network.responseReceived":
            if params["requestId"] in self.by_id:
                self.by_id[params["requestId"]].status = int(params["response"]["status"])
        elif method == "Network.loadingFinished":
            self.pending.discard(params["requestId"])
        elif method == "Network.loadingFailed":
            rid = params["requestId"]
            self.pending.discard(rid)
            if rid in self.by_id:
                failed = self.by_id[rid]
                failed.error = params.get("errorText")
                failed.blocked_reason = params.get("blockedReason")
        elif method == "Target.attachedToTarget":
            self.new_children.append(params["sessionId"])
        elif method == "Page.loadEventFired":
            self.loaded = True
        elif method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in params["args"])
            self.console_errors.append(text)
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            exception = details.get("exception", {})
            self.console_errors.append(exception.get("description") or details.get("text", ""))
        elif method == "Log.entryAdded":
            entry = params["entry"]
            text = entry.get("text", "")
            if "Content Security Policy" in text:
                self.csp_violations.append(text)
            if entry.get("level") == "error":
                self.console_errors.append(text)


class Browser:
    """One headless browser process, driven over its DevTools pipe."""

    def __init__(self, binary: str | None = None) -> None:
        self.binary = binary or find_chromium()
        self.profile = Path(tempfile.mkdtemp(prefix="browser-profile-"))
        self.log_path = self.profile.parent / f"{self.profile.name}.log"
        self._next_id = 0
        self._buffer = b""
        self._events: list[dict[str, Any]] = []
        # The browser reads commands from fd 3 and writes answers to fd 4.
        # The pipe ends are first moved to fds >= 10, so that bash's
        # redirections below cannot overwrite one with the other.
        to_browser, self._commands = os.pipe()
        self._answers, from_browser = os.pipe()
        child_read = fcntl.fcntl(to_browser, fcntl.F_DUPFD_CLOEXEC, 10)
        child_write = fcntl.fcntl(from_browser, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(to_browser)
        os.close(from_browser)
        argv = [self.binary, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"]
        script = f'exec "$@" 3<&{child_read} 4>&{child_write} {child_read}<&- {child_write}>&-'
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                ["bash", "-c", script, "bash", *argv],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=(child_read, child_write),
                start_new_session=True,
                env={**os.environ, "HOME": str(self.profile)},
            )
        os.close(child_read)
        os.close(child_write)
        #: The browser's process group; its id is the first process's.
        self.pgid = self.process.pid
        try:
            self.version = self.call("Browser.getVersion", timeout=START_TIMEOUT)["product"]
        except BaseException:
            self.close()
            raise

    # The protocol

    def _send(self, method: str, params: dict[str, Any], session: str | None) -> int:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self._commands, data) :]
        return self._next_id

    def _receive(self, deadline: float) -> dict[str, Any]:
        """The next message from the browser; raises when the deadline passes first."""
        while b"\0" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _NoAnswer(f"no answer from the browser in time; log: {self.log_tail()}")
            ready, _, _ = select.select([self._answers], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(self._answers, 1 << 20)
            if not chunk:
                raise BrowserError(f"the browser closed its pipe; log: {self.log_tail()}")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        message: dict[str, Any] = json.loads(raw)
        return message

    def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        session: str | None = None,
        timeout: float = RENDER_TIMEOUT,
    ) -> dict[str, Any]:
        """Sends one command and returns its result; events that come first are kept."""
        deadline = time.monotonic() + timeout
        wanted = self._send(method, params or {}, session)
        while True:
            message = self._receive(deadline)
            if message.get("id") != wanted:
                if "method" in message:
                    self._events.append(message)
                continue
            if "error" in message:
                raise BrowserError(f"{method}: {message['error']}")
            result: dict[str, Any] = message.get("result", {})
            return result

    def _watch(self, session_id: str, *, top: bool) -> None:
        """Turns on the events a tab (or a frame or worker it started) reports."""
        # Frames in other processes and workers report through sessions of
        # their own, paused until they are watched too.
        auto_attach = {"autoAttach": True, "waitForDebuggerOnStart": True, "flatten": True}
        commands: list[tuple[str, dict[str, Any]]] = [
            ("Network.enable", {}),
            ("Runtime.enable", {}),
            ("Log.enable", {}),
            ("Target.setAutoAttach", auto_attach),
        ]
        if top:
            self.call("Page.enable", session=session_id)
            for method, params in commands:
                self.call(method, params, session=session_id)
            return
        # A worker lacks some of these domains, and a frame may be gone
        # already; what can be watched is enough.
        for method, params in [*commands, ("Runtime.runIfWaitingForDebugger", {})]:
            with contextlib.suppress(BrowserError):
                self.call(method, params, session=session_id, timeout=5.0)

    def _pump(self, state: _Session, deadline: float, until: Callable[[], bool]) -> None:
        """Feeds the tab's events to ``state`` until ``until()`` holds or the deadline passes."""
        while True:
            while self._events or state.new_children:
                events, self._events = self._events, []
                for event in events:
                    if event.get("sessionId") in state.sessions:
                        state.on_event(event["method"], event.get("params", {}))
                children, state.new_children = state.new_children, []
                for child in children:
                    state.sessions.add(child)
                    self._watch(child, top=False)
                    state.last_activity = time.monotonic()
            if until():
                return
            if time.monotonic() >= deadline:
                pending = sorted(state.by_id[r].url for r in state.pending)
                raise BrowserError(
                    f"the page did not settle in time: {state.page_url}"
                    f" (loaded: {state.loaded}, requests still open: {pending})"
                )
            # Wake up often enough to notice that the network went quiet.
            with contextlib.suppress(_NoAnswer):
                self._events.append(self._receive(min(deadline, time.monotonic() + QUIET / 2)))

    # Rendering

    def render(
        self,
        page: Path,
        *,
        out_png: Path,
        width: int = 1280,
        height: int = 800,
        timeout: float = RENDER_TIMEOUT,
        ready: str | None = None,
        evaluate: Sequence[str] = (),
        javascript: bool = True,
    ) -> Rendered:
        """Loads ``page`` in a new tab, waits for it to settle, and reports what it did.

        ``ready``, a JavaScript expression, is one more condition for the page
        to count as settled: it must be true (checked every ``QUIET`` / 2
        seconds), for a page whose work ends later than its load.
        ``evaluate``: JavaScript expressions run in order once the page settled
        (a click, a question), before the DOM is read and the screenshot taken;
        their values (JSON) are ``Rendered.values``. With ``javascript`` false
        the page's own scripts do not run (the expressions still do).
        """
        deadline = time.monotonic() + timeout
        url = page.resolve().as_uri()
        target = self.call(
            "Target.createTarget",
            {"url": "about:blank"},
            timeout=timeout,
        )["targetId"]
        session_id = self.call(
            "Target.attachToTarget", {"targetId": target, "flatten": True}, timeout=timeout
        )["sessionId"]
        state = _Session(url, sessions={session_id})
        try:

            def send(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
                return self.call(
                    method,
                    params,
                    session=session_id,
                    timeout=max(0.0, deadline - time.monotonic()),
                )

            self._watch(session_id, top=True)
            if not javascript:
                send("Emulation.setScriptExecutionDisabled", {"value": True})
            send(
                "Emulation.setDeviceMetricsOverride",
                {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            )
            navigated = send("Page.navigate", {"url": url})
            if "errorText" in navigated:
                raise BrowserError(f"cannot load {url}: {navigated['errorText']}")

            def settled() -> bool:
                quiet = time.monotonic() - state.last_activity >= QUIET
                if not (state.loaded and not state.pending and quiet):
                    return False
                if ready is None:
                    return True
                answer = send("Runtime.evaluate", {"expression": ready, "returnByValue": True})
                if answer["result"].get("value"):
                    return True
                # Another quiet period must follow before the next check.
                state.last_activity = time.monotonic() - QUIET / 2
                return False

            self._pump(state, deadline, settled)
            values = []
            for expression in evaluate:
                answer = send(
                    "Runtime.evaluate",
                    {"expression": expression, "returnByValue": True, "awaitPromise": True},
                )
                if "exceptionDetails" in answer:
                    raise BrowserError(f"{expression}: {answer['exceptionDetails']}")
                values.append(answer["result"].get("value"))
            dom = send(
                "Runtime.evaluate",
                {"expression": "document.documentElement.outerHTML", "returnByValue": True},
            )["result"]["value"]
            text = send(
                "Runtime.evaluate",
                {
                    "expression": "document.body ? document.body.innerText : ''",
                    "returnByValue": True,
                },
            )["result"]["value"]
            shot = send("Page.captureScreenshot", {"format": "png"})
            out_png.write_bytes(base64.b64decode(shot["data"]))
            # Anything that arrived while the DOM and the screenshot were taken.
            self._pump(state, deadline, lambda: True)
        except _NoAnswer as error:
            raise BrowserError(f"the page did not settle in time: {url} ({error})") from error
        finally:
            self._close_tab(target, session_id)
        return Rendered(
            png=out_png,
            dom=dom,
            text=text,
            requests=state.requests,
            console_errors=state.console_errors,
            csp_violations=state.csp_violations,
            width=width,
            height=height,
            values=values,
        )

    def _close_tab(self, target: str, session_id: str) -> None:
        """Closes a tab and waits until the browser says it is gone."""
        with contextlib.suppress(BrowserError):
            self.call("Target.closeTarget", {"targetId": target}, timeout=5.0)
            deadline = time.monotonic() + 5.0
            while True:
                for event in self._events:
                    detached = event.get("method") == "Target.detachedFromTarget"
                    if detached and event["params"].get("sessionId") == session_id:
                        self._events.clear()
                        return
                self._events.clear()
                self._events.append(self._receive(deadline))

    # Stopping

    def log_tail(self, lines: int = 20) -> str:
        """The end of the browser's own log, without its complaints about a missing D-Bus."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        kept = [line for line in text.splitlines() if "dbus" not in line]
        return "\n".join(kept[-lines:])

    def close(self) -> None:
        """Asks the browser to quit, then kills its whole process group.

        Any process outside the group that names the browser's profile is
        killed too, and the profile is deleted.
        """
        if self.process.poll() is None:
            with contextlib.suppress(BrowserError, OSError):
                self.call("Browser.close", timeout=5.0)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=5.0)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pgid, signal.SIGKILL)
        self.process.wait()
        # A killed process takes a moment to die; the group's crash handler is
        # outside the group and is killed separately.
        deadline = time.monotonic() + STOP_TIMEOUT
        while (left := self.leftovers()) and time.monotonic() < deadline:
            for pid in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.02)
        for fd in (self._commands, self._answers):
            with contextlib.suppress(OSError):
                os.close(fd)
        shutil.rmtree(self.profile, ignore_errors=True)
        self.log_path.unlink(missing_ok=True)

    def leftovers(self) -> list[int]:
        """Live (not zombie) processes in the browser's group or naming its profile."""
        found = []
        needle = str(self.profile).encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            state, pgid = stat[0], int(stat[2])
            if state != "Z" and (pgid == self.pgid or needle in cmdline):
                found.append(int(entry.name))
        return found

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextlib.contextmanager
def browser() -> Iterator[Browser]:
    """A browser for several renders, stopped (its whole process group) afterwards."""
    with Browser() as started:
        yield started


def render(
    page: Path,
    *,
    out_png: Path,
    width: int = 1280,
    height: int = 800,
    timeout: float = RENDER_TIMEOUT,
    ready: str | None = None,
) -> Rendered:
    """Renders one page in a browser of its own."""
    with Browser() as started:
        return started.render(
            page, out_png=out_png, width=width, height=height, timeout=timeout, ready=ready
        )
