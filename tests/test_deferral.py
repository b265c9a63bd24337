"""Modules a run never uses stay unloaded, and still work when something does use them."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import (
    HANG_LIMIT,
    ROOT,
    agent_env,
    read_result,
    wrapper_argv,
    write_scenario,
)
from wrapper.deferral import ANSWERED, UNUSED_BY_A_RUN

FINAL: list[dict[str, Any]] = [
    {"assistant": {"text": "All done.", "stopReason": "stop"}},
    {"agent_end": {"willRetry": False}},
    {"agent_settled": {}},
]
#: What loading the deferred modules would bring in besides: OpenSSL's two
#: extension modules, and those of the compressors.
ALSO_UNLOADED = ("_ssl", "_hashlib", "hashlib", "secrets", "_bz2", "_lzma", "ast", "dis", "token")


#: Put on the wrapper's PYTHONPATH: records every module the wrapper's
#: processes really load (a stand-in in sys.modules is no load; a module a
#: stand-in then loads is), not the agent's (it carries the run's id).
RECORD_IMPORTS = """
import os, sys
if "AGENT_WRAPPER_RUN_ID" not in os.environ:
    _log = open(os.environ["IMPORT_LOG"] + "." + str(os.getpid()), "a", buffering=1)
    sys.addaudithook(lambda event, args: event == "import" and _log.write(args[0] + "\\n"))
"""


def test_a_whole_run_loads_none_of_the_deferred_modules(tmp_path: Path) -> None:
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(RECORD_IMPORTS)
    scenario = write_scenario(tmp_path, FINAL)
    argv = wrapper_argv(tmp_path / "run", scenario, task="hi", options=["--output", "quiet"])
    env = {
        **agent_env(tmp_path),
        "PYTHONPATH": str(tmp_path / "site"),
        "IMPORT_LOG": str(tmp_path / "imports"),
    }
    proc = subprocess.run(
        argv,
        capture_output=True,
        timeout=HANG_LIMIT,
        env=env,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert read_result(tmp_path / "run" / "result.json")["outcome"] == "ok"
    loaded = {name for log in tmp_path.glob("imports.*") for name in log.read_text().splitlines()}
    assert {"trio", "wrapper.supervision.run"} <= loaded, "the run's own imports are seen"
    assert loaded.isdisjoint({*UNUSED_BY_A_RUN, *ALSO_UNLOADED}), sorted(
        loaded & {*UNUSED_BY_A_RUN, *ALSO_UNLOADED}
    )


#: What a run that neither speaks ACP nor shows a live view has no use for,
#: though the modules that could need it are loaded; nor any run the checks
#: of a batch's spec.
NOT_FOR_THIS_RUN = ("wrapper.dialects.acp", "wrapper.sinks.pretty", "wrapper.batch_command")


def test_a_quiet_run_of_a_one_way_agent_loads_no_acp_client_and_no_live_view(
    tmp_path: Path,
) -> None:
    # Each module a run loads stays in its memory for the run's whole life.
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(RECORD_IMPORTS)
    scenario = write_scenario(tmp_path, FINAL)
    argv = wrapper_argv(tmp_path / "run", scenario, task="hi", options=["--output", "quiet"])
    env = {
        **agent_env(tmp_path),
        "PYTHONPATH": str(tmp_path / "site"),
        "IMPORT_LOG": str(tmp_path / "imports"),
    }
    proc = subprocess.run(
        argv,
        capture_output=True,
        timeout=HANG_LIMIT,
        env=env,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    loaded = {name for log in tmp_path.glob("imports.*") for name in log.read_text().splitlines()}
    assert "wrapper.supervision.run" in loaded, "the run's own imports are seen"
    unneeded = sorted(
        name
        for name in loaded
        if any(name == root or name.startswith(root + ".") for root in NOT_FOR_THIS_RUN)
    )
    assert not unneeded, unneeded


# Run in a fresh interpreter: the deferral changes sys.modules, which is the process's.
USES_EACH = """
import sys
from wrapper.deferral import Deferred, defer_unused_imports, loading_trio

defer_unused_imports()
with loading_trio():
    import trio
import urllib.parse

loaded = [name for name in (*sys.argv[1:], "_ssl", "_hashlib", "_bz2", "_lzma", "ast", "dis")
          if name in sys.modules and not isinstance(sys.modules[name], Deferred)]
assert not loaded, f"loaded by importing trio: {loaded}"

# logging, as trio logs what an instrument raised: to the logger it asked
# for before logging was loaded.
import logging
assert isinstance(sys.modules["logging"], Deferred)
assert trio._core._instrumentation.INSTRUMENT_LOGGER.name == "trio.abc.Instrument"
assert not isinstance(sys.modules["logging"], Deferred), "the logger's first use loads logging"
trio._core._asyncgens.ASYNCGEN_LOGGER.propagate = False
assert not logging.getLogger("trio.async_generator_errors").propagate
class Failing(trio.abc.Instrument):
    def before_run(self):
        raise RuntimeError("instrument failed")
logged = []
class Keep(logging.Handler):
    def emit(self, record):
        logged.append((record.name, record.getMessage()))
import importlib
real_logging = importlib.import_module("logging")
assert not isinstance(real_logging, Deferred) and sys.modules["logging"] is real_logging
real_logging.getLogger("trio.abc.Instrument").addHandler(Keep())
trio.run(trio.sleep, 0, instruments=[Failing()])
assert [name for name, _ in logged] == ["trio.abc.Instrument"], logged
assert logging.getLogger("trio") is real_logging.getLogger("trio")
from logging import handlers
assert handlers.RotatingFileHandler

# ssl, as trio's TLS stream uses it: one module, whichever way it is reached.
import ssl
import trio.testing
stream = trio.SSLStream(trio.testing.MemorySendStream(), ssl.create_default_context(),
                        server_hostname="example.com")
assert stream.server_hostname == "example.com"
import importlib
real_ssl = importlib.import_module("ssl")
assert not isinstance(real_ssl, Deferred) and sys.modules["ssl"] is real_ssl
assert ssl.SSLError is real_ssl.SSLError and ssl.MemoryBIO is real_ssl.MemoryBIO

# hmac, as trio's DTLS cookies use it.
import hmac, hashlib
assert hmac.digest(b"key", b"data", "sha256") == hmac.new(b"key", b"data", hashlib.sha256).digest()
assert hmac.compare_digest(b"a", b"a")

# ipaddress, as urllib.parse checks a bracketed host with it.
assert urllib.parse.urlsplit("http://[::1]:8080/x").hostname == "::1"
try:
    urllib.parse.urlsplit("http://[not-an-address]/")
except ValueError:
    pass
else:
    raise AssertionError("a bad bracketed host went unnoticed")

# idna, as trio encodes host names with it.
import idna
assert idna.encode("bücher.example", uts46=True) == b"xn--bcher-kva.example"

# inspect, as dataclasses, attrs and trio use it; what its stand-in answers
# itself is the module's own.
import attrs, dataclasses, inspect
@dataclasses.dataclass
class Plain:
    size: int
assert Plain.__doc__ == "Plain(size: int)"
@attrs.define
class Converted:
    size: int = attrs.field(converter=int)
assert Converted("3").size == 3
assert str(inspect.signature(lambda a, b=1: None)) == "(a, b=1)"
import pathlib
real_inspect = importlib.import_module("inspect")
for method in vars(pathlib.Path).values():
    if getattr(method, "__doc__", None):
        assert inspect.cleandoc(method.__doc__) == real_inspect.cleandoc(method.__doc__)
assert trio.Path.read_text.__doc__.rstrip().endswith(
    real_inspect.cleandoc(pathlib.Path.read_text.__doc__)
)
async def coroutine_function(): pass
coroutine = coroutine_function()
assert inspect.iscoroutine(coroutine) and not inspect.iscoroutine(coroutine_function)
coroutine.close()
assert trio.run(trio.to_thread.run_sync, lambda: 7) == 7

# tokenize, as linecache reads a source file for a traceback.
import traceback
try:
    urllib.parse.urlsplit("http://[not-an-address]/")
except ValueError as error:
    raised_at = traceback.extract_tb(error.__traceback__)[-1]
assert raised_at.filename.endswith(".py") and raised_at.line, raised_at

# tempfile, bz2 and lzma, as ctypes.util and shutil would use them.
import bz2, lzma, os, shutil, tempfile
assert bz2.decompress(bz2.compress(b"x" * 100)) == lzma.decompress(lzma.compress(b"x" * 100))
assert {"bztar", "xztar"} <= {name for name, _ in shutil.get_archive_formats()}
with tempfile.TemporaryDirectory() as directory:
    assert os.path.isdir(directory)

for name in sys.argv[1:]:
    assert not isinstance(sys.modules[name], Deferred), name
print("ok")
"""


def assert_prints_ok(code: str, *args: str) -> None:
    """``code`` run by a fresh Python from the repository root prints ok."""
    proc = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=HANG_LIMIT,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_each_deferred_module_still_works_when_used() -> None:
    assert_prints_ok(USES_EACH, *UNUSED_BY_A_RUN)


def test_a_stand_in_loads_its_module_once() -> None:
    code = """
import sys
from wrapper.deferral import defer_import
defer_import("ipaddress")
stand_in = sys.modules["ipaddress"]
loads = []  # what audit hooks (the whole-run test's) see of real loads
sys.addaudithook(lambda event, args: event == "import" and loads.append(args[0]))
first = stand_in.IPv4Address          # loads the module
second = stand_in.ip_address("10.0.0.1")  # another name: no second load
import ipaddress
assert ipaddress is not stand_in and sys.modules["ipaddress"] is ipaddress
assert first is ipaddress.IPv4Address and type(second) is ipaddress.IPv4Address
assert not hasattr(stand_in, "no_such_name")
assert loads.count("ipaddress") == 1, loads
print("ok")
"""
    assert_prints_ok(code)


#: Runs a whole run in this interpreter, then says how many of the sources
#: attrs wrote for its classes' methods the process still holds.
GENERATED_SOURCES_KEPT = """
import linecache, sys
from wrapper.cli import main
status = main(sys.argv[1:])
kept = [name for name in linecache.cache if name.startswith("<attrs generated")]
print(status, len(kept))
"""


def test_a_run_keeps_no_generated_source_for_its_whole_life(tmp_path: Path) -> None:
    # attrs keeps each method it writes (for trio's classes) as source text,
    # for tracebacks: memory a run would hold from start to end.
    scenario = write_scenario(tmp_path, FINAL)
    argv = wrapper_argv(tmp_path / "run", scenario, task="hi", options=["--output", "quiet"])
    proc = subprocess.run(
        [sys.executable, "-c", GENERATED_SOURCES_KEPT, *argv[3:]],
        capture_output=True,
        text=True,
        timeout=HANG_LIMIT,
        env=agent_env(tmp_path),
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert proc.stdout.split() == ["0", "0"], proc.stderr


@settings(max_examples=500)
@given(st.text(alphabet=" \t\n\x0c\u3000ab"))
def test_a_stand_in_cleans_a_docstring_as_inspect_does(doc: str) -> None:
    assert ANSWERED["inspect"]["cleandoc"](doc) == inspect.cleandoc(doc)  # type: ignore[operator]


#: What only an ``mcp_tool`` hook handler loads: the MCP SDK and its own.
MCP_SDK = ("mcp", "mcp_types", "anyio", "pydantic", "httpx2", "wrapper.hooks.mcp_handler")


def test_a_run_with_hooks_but_no_mcp_tool_handler_never_loads_the_mcp_sdk(
    tmp_path: Path,
) -> None:
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(RECORD_IMPORTS)
    hook = {"type": "command", "command": f"{sys.executable} -c pass"}
    settings = tmp_path / "settings.json"
    settings.write_text(
        orjson.dumps(
            {
                "hooks": {"Stop": [{"hooks": [hook]}], "UserPromptSubmit": [{"hooks": [hook]}]},
                "mcpServers": {"gate": {"command": "gate-server"}},
            }
        ).decode()
    )
    scenario = write_scenario(tmp_path, FINAL)
    options = ["--output", "quiet", "--settings", str(settings)]
    argv = wrapper_argv(tmp_path / "run", scenario, task="hi", options=options)
    env = {
        **agent_env(tmp_path),
        "PYTHONPATH": str(tmp_path / "site"),
        "IMPORT_LOG": str(tmp_path / "imports"),
    }
    proc = subprocess.run(
        argv,
        capture_output=True,
        timeout=HANG_LIMIT,
        env=env,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert read_result(tmp_path / "run" / "result.json")["stopAllowedBy"] == "handlers"
    loaded = {name for log in tmp_path.glob("imports.*") for name in log.read_text().splitlines()}
    assert "wrapper.hooks.runner" in loaded, "the run's own imports are seen"
    sdk = sorted(n for n in loaded if any(n == r or n.startswith(r + ".") for r in MCP_SDK))
    assert not sdk, sdk
