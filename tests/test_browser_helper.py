"""The headless-browser helper, on small hand-made pages.

One browser renders every page of the module; the tests that look at how a
browser starts and stops start their own.
"""

from __future__ import annotations

import json
import struct
import threading
import time
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests import browser as browser_module
from tests.browser import Browser, BrowserError, render
from tests.conftest import processes_matching, wait_until

#: A 1x1 transparent PNG, served by the recording server.
PIXEL = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's header; fails unless it is a well-formed PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "no PNG signature"
    length, kind = struct.unpack(">I4s", data[8:16])
    assert (length, kind) == (13, b"IHDR"), "the first chunk is not IHDR"
    ihdr = data[16:29]
    (crc,) = struct.unpack(">I", data[29:33])
    assert zlib.crc32(kind + ihdr) == crc, "IHDR checksum"
    assert data.endswith(b"IEND\xaeB`\x82"), "no IEND chunk"
    width, height = struct.unpack(">II", ihdr[:8])
    return width, height


class Recorder:
    """A local HTTP server that remembers every path asked for.

    ``/frame.html`` is a page showing ``/inner.png``, ``/hang...`` is never
    answered, anything else is a pixel.
    """

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.released = threading.Event()
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                recorder.paths.append(self.path)
                if self.path.startswith("/hang"):
                    # No answer until the server closes, and then none at all.
                    recorder.released.wait(10)
                    self.close_connection = True
                    return
                kind, body = "image/png", PIXEL
                if self.path == "/frame.html":
                    kind, body = "text/html", b'<p>framed</p><img src="/inner.png">'
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with Browser() as started:
        yield started
    assert started.leftovers() == []


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    server = Recorder()
    yield server
    server.close()


def page(tmp_path: Path, body: str, head: str = "", name: str = "page.html") -> Path:
    path = tmp_path / name
    path.write_text(
        f'<!doctype html><html><head><meta charset="utf-8">{head}</head><body>{body}</body></html>',
        encoding="utf-8",
    )
    return path


LABELS = ["claude", "codex", "gemini", "élan vital", "naïve — done", "12 runs ≥ 3 s"]


def test_the_dom_holds_every_label(browser: Browser, tmp_path: Path) -> None:
    # Half the labels are in the markup, half are added by a script from data.
    static = "".join(f"<li>{label}</li>" for label in LABELS[:3])
    script = (
        f"<script>for (const l of {json.dumps(LABELS[3:])}) {{"
        "const li = document.createElement('li'); li.textContent = l;"
        "document.getElementById('labels').append(li);}</script>"
    )
    rendered = browser.render(
        page(tmp_path, f'<ul id="labels">{static}</ul>{script}'), out_png=tmp_path / "shot.png"
    )
    for label in LABELS:
        assert f"<li>{label}</li>" in rendered.dom
        assert label in rendered.text
    assert rendered.requests == []
    assert rendered.console_errors == []
    assert rendered.csp_violations == []


def test_a_request_to_a_local_server_is_reported(
    browser: Browser, recorder: Recorder, tmp_path: Path
) -> None:
    url = recorder.url("/x.png")
    rendered = browser.render(
        page(tmp_path, f'<img src="{url}" alt="x">'), out_png=tmp_path / "shot.png"
    )
    assert rendered.urls == [url]
    assert rendered.requests[0].status == 200
    assert rendered.requests[0].resource_type == "Image"
    assert recorder.paths == ["/x.png"]


def test_a_strict_csp_blocks_an_external_image(
    browser: Browser, recorder: Recorder, tmp_path: Path
) -> None:
    csp = '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'">'
    url = recorder.url("/blocked.png")
    script = "<script>document.body.append('script ran')</script>"
    rendered = browser.render(
        page(tmp_path, f'<p>report</p><img src="{url}">{script}', head=csp),
        out_png=tmp_path / "shot.png",
    )
    # The attempt is reported, as refused by the policy, and never reached the server.
    assert rendered.urls == [url]
    assert rendered.requests[0].blocked_reason == "csp"
    assert rendered.requests[0].status is None
    assert recorder.paths == []
    # The policy's other refusal, the inline script, is reported too.
    [image, inline] = rendered.csp_violations
    assert url in image
    assert "inline script" in inline
    assert "script ran" not in rendered.text


def test_requests_of_a_frame_and_a_worker_are_reported(
    browser: Browser, recorder: Recorder, tmp_path: Path
) -> None:
    # The frame is another site, so it runs in a process of its own. The
    # worker's request may come after the load; the page says when it did.
    worker = f"fetch('{recorder.url('/from-worker')}').finally(() => postMessage('done'))"
    script = (
        f"<script>const w = new Worker(URL.createObjectURL(new Blob([{json.dumps(worker)}],"
        "{type: 'text/javascript'}))); w.onmessage = () => { document.title = 'done'; };</script>"
    )
    rendered = browser.render(
        page(tmp_path, f'<iframe src="{recorder.url("/frame.html")}"></iframe>{script}'),
        out_png=tmp_path / "shot.png",
        ready="document.title === 'done'",
    )
    expected = ["/frame.html", "/inner.png", "/from-worker"]
    assert sorted(rendered.urls) == sorted(recorder.url(p) for p in expected)
    assert sorted(recorder.paths) == sorted(expected)


def test_a_page_that_is_never_ready_times_out(browser: Browser, tmp_path: Path) -> None:
    with pytest.raises(BrowserError, match="did not settle"):
        browser.render(
            page(tmp_path, "<p>x</p>"), out_png=tmp_path / "shot.png", timeout=1.0, ready="false"
        )


def test_a_host_name_is_never_resolved(browser: Browser, tmp_path: Path) -> None:
    url = "https://cdn.example.com/lib.js"
    rendered = browser.render(
        page(tmp_path, f'<script src="{url}"></script>'), out_png=tmp_path / "shot.png"
    )
    assert rendered.urls == [url]
    assert rendered.requests[0].error == "net::ERR_NAME_NOT_RESOLVED"


def test_an_inline_script_ran(browser: Browser, tmp_path: Path) -> None:
    rows = "".join(f"<tr><td>{name}</td><td>{n}</td></tr>" for name, n in [("b", 2), ("c", 3)])
    rows += "<tr><td>a</td><td>1</td></tr>"
    script = (
        "<script>const body = document.querySelector('#t tbody');"
        "const key = r => r.cells[0].textContent;"
        "[...body.rows].sort((x, y) => key(x).localeCompare(key(y)))"
        ".forEach(r => body.append(r));"
        "console.error('sorted');</script>"
    )
    rendered = browser.render(
        page(tmp_path, f'<table id="t"><tbody>{rows}</tbody></table>{script}'),
        out_png=tmp_path / "shot.png",
    )
    cells = [rendered.dom.index(f"<td>{name}</td>") for name in "abc"]
    assert cells == sorted(cells), rendered.dom
    assert rendered.console_errors == ["sorted"]


def test_an_uncaught_exception_is_a_console_error(browser: Browser, tmp_path: Path) -> None:
    rendered = browser.render(
        page(tmp_path, "<script>throw new TypeError('boom')</script>"),
        out_png=tmp_path / "shot.png",
    )
    assert any("TypeError: boom" in e for e in rendered.console_errors), rendered.console_errors


def test_the_screenshot_is_a_png_of_the_requested_size(browser: Browser, tmp_path: Path) -> None:
    text = page(tmp_path, "<h1 style='font-size:60px'>Agent runs</h1>", name="text.html")
    blank = page(tmp_path, "", name="blank.html")
    shots = {}
    for source, width, height in [(text, 800, 600), (blank, 800, 600), (text, 1280, 2000)]:
        out = tmp_path / f"{source.stem}-{width}x{height}.png"
        rendered = browser.render(source, out_png=out, width=width, height=height)
        assert rendered.png == out
        assert png_size(out.read_bytes()) == (width, height)
        shots[source.stem, height] = out.read_bytes()
    # The text was drawn: the same size without it gives another picture.
    assert shots["text", 600] != shots["blank", 600]


def test_a_render_that_does_not_settle_times_out(
    browser: Browser, recorder: Recorder, tmp_path: Path
) -> None:
    source = page(tmp_path, f'<img src="{recorder.url("/hang.png")}">')
    started = time.monotonic()
    with pytest.raises(BrowserError, match="did not settle"):
        browser.render(source, out_png=tmp_path / "shot.png", timeout=1.0)
    assert time.monotonic() - started < 5.0
    # The browser is still usable, and the tabs were closed.
    rendered = browser.render(
        page(tmp_path, "<p>next</p>", name="next.html"), out_png=tmp_path / "next.png"
    )
    assert "next" in rendered.text

    def tabs() -> list[str]:
        targets = browser.call("Target.getTargets")["targetInfos"]
        return [t["url"] for t in targets if t["type"] == "page" and t["url"].startswith("file:")]

    assert wait_until(lambda: not tabs(), timeout=5.0), tabs()


def test_nothing_is_left_running(tmp_path: Path) -> None:
    started = Browser()
    profile = started.profile
    try:
        assert started.leftovers(), "the browser is not running"
        rendered = started.render(page(tmp_path, "<p>one</p>"), out_png=tmp_path / "one.png")
        assert "one" in rendered.text
    finally:
        started.close()
    assert started.leftovers() == []
    assert processes_matching(str(profile)) == []
    assert started.process.returncode is not None
    assert not profile.exists()


def test_a_one_shot_render_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[Browser] = []

    class Recorded(Browser):
        def __init__(self) -> None:
            super().__init__()
            started.append(self)

    monkeypatch.setattr(browser_module, "Browser", Recorded)
    rendered = render(page(tmp_path, "<p>alone</p>"), out_png=tmp_path / "a.png", width=320)
    assert "alone" in rendered.text
    assert png_size(rendered.png.read_bytes()) == (320, 800)
    [one] = started
    assert one.leftovers() == []
    assert not one.profile.exists()


def test_a_browser_killed_outright_leaves_nothing(tmp_path: Path) -> None:
    started = Browser()
    rendered = started.render(page(tmp_path, "<p>x</p>"), out_png=tmp_path / "x.png")
    assert "x" in rendered.text
    # No polite quit: the process dies first, then the helper cleans up.
    started.process.kill()
    started.close()
    assert started.leftovers() == []


def test_expressions_run_after_the_page_settled_and_before_the_dom_is_read(
    browser: Browser, tmp_path: Path
) -> None:
    script = (
        "<script>document.getElementById('b').addEventListener('click', () => "
        "{ document.getElementById('out').textContent = 'clicked'; });</script>"
    )
    rendered = browser.render(
        page(tmp_path, f'<button id="b">go</button><p id="out">waiting</p>{script}'),
        out_png=tmp_path / "shot.png",
        evaluate=["document.getElementById('out').textContent",
                  "document.getElementById('b').click()",
                  "[document.getElementById('out').textContent, 1 + 1]"],
    )  # fmt: skip
    assert rendered.values == ["waiting", None, ["clicked", 2]]
    assert '<p id="out">clicked</p>' in rendered.dom


def test_without_javascript_the_pages_scripts_do_not_run(browser: Browser, tmp_path: Path) -> None:
    body = "<p id='p'>static</p><script>document.getElementById('p').textContent = 'ran'</script>"
    source = page(tmp_path, body)
    off = browser.render(
        source,
        out_png=tmp_path / "off.png",
        javascript=False,
        evaluate=["document.getElementById('p').textContent"],
    )
    on = browser.render(source, out_png=tmp_path / "on.png")
    assert off.values == ["static"]
    assert "static" in off.text
    assert "ran" in on.text


def test_an_expression_that_throws_is_an_error(browser: Browser, tmp_path: Path) -> None:
    with pytest.raises(BrowserError, match="nothing is not defined"):
        browser.render(
            page(tmp_path, "<p>x</p>"), out_png=tmp_path / "shot.png", evaluate=["nothing.at.all"]
        )
