"""Runs exported as OpenTelemetry traces: the span tree, its attributes, the
trace context given to the agent, batches, and the bound on the final flush."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import wrapper
from tests.conftest import (
    FAKE_PI,
    HANG_LIMIT,
    agent_env,
    read_result,
    wrapper_argv,
    write_scenario,
)
from wrapper.sinks import telemetry, trace_ids

CALLER_TRACE = "0af7651916cd43dd8448eb211c80319c"
CALLER_SPAN = "b7ad6b7169203331"
CALLER_TRACEPARENT = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"

END: list[dict[str, Any]] = [{"agent_end": {"willRetry": False}}, {"agent_settled": {}}]

#: Blocks the first stop with a reason, allows the next; notes its TRACEPARENT.
BLOCK_ONCE = """import json, os, sys
with open(sys.argv[1], "a") as seen:
    print(os.environ.get("TRACEPARENT"), file=seen)
event = json.load(sys.stdin)
if not event["stop_hook_active"]:
    print(json.dumps({"decision": "block", "reason": "You did not run the tests."}))
"""


@pytest.fixture
def exported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """The spans of the runs made in this process; the test's agent environment."""
    for name in list(os.environ):
        if name.startswith(("AGENT_WRAPPER_", "OTEL_")) or name in ("TRACEPARENT", "TRACESTATE"):
            monkeypatch.delenv(name)
    for name, value in agent_env(tmp_path).items():
        monkeypatch.setenv(name, value)
    exporter = InMemorySpanExporter()
    telemetry.use_exporter(exporter)
    try:
        yield exporter
    finally:
        telemetry.use_exporter(None)


def records(tmp_path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (tmp_path / "record.jsonl").read_text().splitlines()]


def hex_ids(span: ReadableSpan) -> tuple[str, str]:
    context = span.get_span_context()
    assert context is not None
    return f"{context.trace_id:032x}", f"{context.span_id:016x}"


def parent_id(span: ReadableSpan) -> str | None:
    return None if span.parent is None else f"{span.parent.span_id:016x}"


def steered_run(tmp_path: Path) -> tuple[list[str], str]:
    """The fake agent answers, a Stop hook sends it back once, and it runs a tool."""
    hook = tmp_path / "gate.py"
    hook.write_text(BLOCK_ONCE)
    settings = tmp_path / "settings.json"
    settings.write_text(
        json.dumps(
            {
                "hooks": {
                    "Stop": [
                        {
                            "hooks": [
                                {
                                    "type": "command",
                                    "command": f"{sys.executable} {hook} {tmp_path / 'seen'}",
                                }
                            ]
                        }
                    ]
                }
            }
        )
    )
    scenario = write_scenario(
        tmp_path,
        [{"assistant": {"text": "Fixed the parser.", "stopReason": "stop"}}, *END],
        resumes=[
            [
                {
                    "assistant": {
                        "text": "Running the tests.",
                        "toolCalls": [{"name": "bash", "arguments": {"command": "pytest -q"}}],
                    }
                },
                {"tool": {"name": "bash", "duration": 0.1, "result": "12 passed"}},
                {"assistant": {"text": "All 12 tests pass.", "stopReason": "stop"}},
                *END,
            ]
        ],
    )
    return [str(FAKE_PI), "--mode", "json", "-p", "--scenario", str(scenario)], str(settings)


def test_a_steered_run_is_one_trace_under_the_callers_span(
    tmp_path: Path, exported: InMemorySpanExporter
) -> None:
    command, settings = steered_run(tmp_path)
    result = wrapper.run(
        command,
        task="Fix the parser",
        run_dir=tmp_path / "run",
        settings=[settings],
        env={"TRACEPARENT": CALLER_TRACEPARENT},
    )
    assert result.outcome == "ok", result.error
    spans = exported.get_finished_spans()
    by_name: dict[str, list[ReadableSpan]] = {}
    for span in spans:
        by_name.setdefault(span.name, []).append(span)

    (run_span,) = by_name["invoke_agent pi"]
    run_trace, run_id = hex_ids(run_span)
    # The caller's TRACEPARENT is the run's parent.
    assert run_trace == CALLER_TRACE
    assert parent_id(run_span) == CALLER_SPAN
    attrs = dict(run_span.attributes or {})
    assert attrs["gen_ai.operation.name"] == "invoke_agent"
    assert attrs["gen_ai.agent.name"] == "pi"
    assert attrs["gen_ai.response.finish_reasons"] == ("stop",)
    assert attrs["gen_ai.conversation.id"] == result.data["sessionId"]
    assert attrs["gen_ai.usage.input_tokens"] == result.data["usage"]["input"] == 300
    assert attrs["gen_ai.usage.output_tokens"] == result.data["usage"]["output"]
    assert attrs["agent_wrapper.outcome"] == "ok"
    assert attrs["agent_wrapper.run_id"] == result.data["runId"]
    assert attrs["agent_wrapper.steer_count"] == 1
    assert attrs["agent_wrapper.attempts"] == 2
    assert "error.type" not in attrs
    # Privacy: no text of the run is exported.
    everything = json.dumps([dict(span.attributes or {}) for span in spans])
    for text in ("Fix the parser", "You did not run the tests", "pytest -q", "12 passed"):
        assert text not in everything

    first, second = sorted(by_name["attempt 1"] + by_name["attempt 2"], key=lambda s: s.name)
    for attempt in (first, second):
        assert hex_ids(attempt)[0] == CALLER_TRACE
        assert parent_id(attempt) == run_id
    assert first.end_time is not None
    assert second.start_time is not None
    assert first.end_time <= second.start_time

    (tool,) = by_name["execute_tool bash"]
    assert parent_id(tool) == hex_ids(second)[1]
    tool_attrs = dict(tool.attributes or {})
    assert tool_attrs["gen_ai.operation.name"] == "execute_tool"
    assert tool_attrs["gen_ai.tool.name"] == "bash"

    # The Stop hook ran twice: at the end of each attempt, under it.
    hooks = sorted(by_name["hook Stop"], key=lambda s: s.start_time or 0)
    assert [parent_id(h) for h in hooks] == [hex_ids(first)[1], hex_ids(second)[1]]
    assert [dict(h.attributes or {})["agent_wrapper.hook.decision"] for h in hooks] == [
        "block",
        "allow",
    ]
    assert "gate.py" in str(dict(hooks[0].attributes or {})["agent_wrapper.hook.handler"])

    # Each attempt's agent got that attempt's span as its TRACEPARENT.
    seen = [record["env"].get("TRACEPARENT") for record in records(tmp_path)]
    assert seen == [f"00-{CALLER_TRACE}-{hex_ids(a)[1]}-01" for a in (first, second)]
    # So did the hook at each attempt's stop.
    assert (tmp_path / "seen").read_text().split() == seen


def test_a_failed_run_says_why_as_its_error_type(
    tmp_path: Path, exported: InMemorySpanExporter
) -> None:
    scenario = write_scenario(tmp_path, [{"assistant": {"text": "Working on it."}}, {"exit": 3}])
    result = wrapper.run(
        [str(FAKE_PI), "--mode", "json", "-p", "--scenario", str(scenario)],
        task="Fix it",
        run_dir=tmp_path / "run",
    )
    assert result.outcome == "error"
    assert result.error is not None
    (run_span,) = [s for s in exported.get_finished_spans() if s.name.startswith("invoke_agent")]
    # Without a caller's TRACEPARENT the run is a trace of its own.
    assert run_span.parent is None
    attrs = dict(run_span.attributes or {})
    assert attrs["error.type"] == result.error["kind"]
    assert attrs["agent_wrapper.outcome"] == "error"
    assert run_span.status.status_code.name == "ERROR"


@pytest.mark.parametrize(
    ("variables", "service"),
    [
        ({}, "agent-wrapper"),
        ({"OTEL_SERVICE_NAME": "fix-bot"}, "fix-bot"),
        (
            {"OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=ci,service.name=ci%20fleet"},
            "ci fleet",
        ),
        (
            {"OTEL_SERVICE_NAME": "fix-bot", "OTEL_RESOURCE_ATTRIBUTES": "service.name=other"},
            "fix-bot",
        ),
    ],
)
@pytest.mark.parametrize("where", ["process", "env"])
def test_the_users_service_name_wins_over_the_default(
    tmp_path: Path,
    exported: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
    variables: dict[str, str],
    service: str,
    where: str,
) -> None:
    if where == "process":
        for name, value in variables.items():
            monkeypatch.setenv(name, value)
    scenario = write_scenario(tmp_path, [{"assistant": {"text": "Done.", "stopReason": "stop"}}])
    result = wrapper.run(
        [str(FAKE_PI), "--mode", "json", "-p", "--scenario", str(scenario)],
        task="Do it",
        run_dir=tmp_path / "run",
        env=variables if where == "env" else None,
    )
    assert result.outcome == "ok", result.error
    spans = exported.get_finished_spans()
    assert spans
    for span in spans:
        assert span.resource.attributes["service.name"] == service
        assert span.resource.attributes["service.version"] == wrapper.__version__
    if "deployment.environment" in variables.get("OTEL_RESOURCE_ATTRIBUTES", ""):
        assert spans[0].resource.attributes["deployment.environment"] == "ci"


@pytest.mark.parametrize(
    ("environ", "wanted"),
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, True),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, True),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}, False),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "console"}, False),
    ],
)
def test_the_standard_environment_decides_whether_runs_are_exported(
    environ: dict[str, str], wanted: bool
) -> None:
    assert telemetry.export_wanted(environ) is wanted


# -- as a command: nothing imported unless asked; a collector; the flush bound ----------

#: Runs the command line in this interpreter, then says how many modules of
#: OpenTelemetry (or of the wrapper's telemetry) it imported. argv[1] is
#: "hide" to make the extra look uninstalled, "grpc" the grpc exporter.
PROBE = """
import sys
if sys.argv[1] == "hide":
    sys.modules["opentelemetry"] = None
if sys.argv[1] == "grpc":
    sys.modules["opentelemetry.exporter.otlp.proto.grpc.trace_exporter"] = None
from wrapper.cli import main
status = main(sys.argv[2:])
loaded = [n for n in sys.modules if n.startswith(("opentelemetry", "wrapper.sinks.telemetry"))]
print("LOADED", len(loaded), file=sys.stderr)
sys.exit(status)
"""


def probe(
    tmp_path: Path, hide: bool | str, **env: str
) -> tuple[subprocess.CompletedProcess[str], Path]:
    scenario = write_scenario(tmp_path, [{"assistant": {"text": "Done.", "stopReason": "stop"}}])
    run_dir = tmp_path / "run"
    argv = wrapper_argv(run_dir, scenario, options=["--output", "quiet"])[3:]
    mode = hide if isinstance(hide, str) else "hide" if hide else "keep"
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, mode, *argv],
        capture_output=True,
        text=True,
        timeout=HANG_LIMIT,
        env={**agent_env(tmp_path), **env},
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    return proc, run_dir


def test_without_the_environment_nothing_of_opentelemetry_is_imported(tmp_path: Path) -> None:
    proc, run_dir = probe(tmp_path, hide=False)
    assert proc.returncode == 0, proc.stderr
    assert "LOADED 0" in proc.stderr
    assert read_result(run_dir / "result.json")["warnings"] == []


def test_asked_for_without_the_extra_the_run_goes_on_with_one_warning(tmp_path: Path) -> None:
    proc, run_dir = probe(tmp_path, hide=True, OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9")
    assert proc.returncode == 0, proc.stderr
    result = read_result(run_dir / "result.json")
    assert result["outcome"] == "ok"
    (warning,) = result["warnings"]
    assert warning["code"] == "telemetry"
    assert "pip install '.[otel]'" in warning["message"]


def test_grpc_asked_for_without_its_exporter_names_that_package(tmp_path: Path) -> None:
    proc, run_dir = probe(
        tmp_path,
        "grpc",
        OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9",
        OTEL_EXPORTER_OTLP_PROTOCOL="grpc",
    )
    assert proc.returncode == 0, proc.stderr
    assert read_result(run_dir / "result.json")["outcome"] == "ok"
    (said,) = [line for line in proc.stderr.splitlines() if "OpenTelemetry" in line]
    # The extra is installed: it is not what is missing.
    assert "pip install opentelemetry-exporter-otlp-proto-grpc" in said
    assert "[otel]" not in said


def test_an_exporter_asked_for_without_the_extra_is_said_once_on_stderr(
    tmp_path: Path,
) -> None:
    """Whoever set OTEL_TRACES_EXPORTER reads stderr: a batch of two runs says
    it there once, with an install line that works (the package is on no index)."""
    blocker = tmp_path / "blocker" / "opentelemetry"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('not installed')\n")
    lines = []
    for n in range(2):
        directory = tmp_path / f"s{n}"
        directory.mkdir()
        path = write_scenario(directory, [{"assistant": {"text": "Done.", "stopReason": "stop"}}])
        command = [str(FAKE_PI), "--mode", "json", "-p", "--scenario", str(path)]
        lines.append(json.dumps({"command": command, "task": f"task {n}"}))
    spec = tmp_path / "spec.jsonl"
    spec.write_text("\n".join(lines) + "\n")
    environ = {
        **agent_env(tmp_path),
        "OTEL_TRACES_EXPORTER": "otlp",
        "PYTHONPATH": os.pathsep.join([str(blocker.parent), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.run(
        [sys.executable, "-m", "wrapper", "batch", str(spec), "--runs-dir", "runs"],
        capture_output=True,
        text=True,
        timeout=HANG_LIMIT,
        env=environ,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    said = [line for line in proc.stderr.splitlines() if "OpenTelemetry" in line]
    assert len(said) == 1, proc.stderr
    assert said[0].startswith("agent-wrapper: warning: the environment asks for OpenTelemetry")
    assert "pip install '.[otel]' in the agent-wrapper checkout" in said[0]
    assert "agent-wrapper[otel]" not in said[0]


#: Two runs of the API in one program that logs to its stdout.
_TWO_RUNS = """
import logging, sys, wrapper
logging.basicConfig(stream=sys.stdout, format="LOG %(name)s %(levelname)s %(message)s")
run_dir, *command = sys.argv[1:]
for n in (1, 2):
    print("OUTCOME", wrapper.run(command, task="Do it", run_dir=f"{run_dir}{n}").outcome)
"""


def test_from_the_api_a_missing_extra_is_logged_once_and_never_printed(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker" / "opentelemetry"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('not installed')\n")
    scenario = write_scenario(tmp_path, [{"assistant": {"text": "Done.", "stopReason": "stop"}}])
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            _TWO_RUNS,
            str(tmp_path / "run"),
            *[str(FAKE_PI), "--mode", "json", "-p", "--scenario", str(scenario)],
        ],
        capture_output=True,
        text=True,
        timeout=HANG_LIMIT,
        env={
            **agent_env(tmp_path),
            "OTEL_TRACES_EXPORTER": "otlp",
            "PYTHONPATH": os.pathsep.join([str(blocker.parent), os.environ.get("PYTHONPATH", "")]),
        },
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    lines = proc.stdout.splitlines()
    assert [line for line in lines if line.startswith("OUTCOME")] == ["OUTCOME ok"] * 2
    (logged,) = [line for line in lines if line.startswith("LOG ")]
    assert logged.startswith("LOG wrapper WARNING the environment asks for OpenTelemetry")
    assert "pip install '.[otel]'" in logged


class Collector:
    """An OTLP/HTTP traces endpoint on 127.0.0.1 that keeps what it is sent."""

    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                collector.requests.append(request)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def spans(self) -> list[Any]:
        return [
            span
            for request in self.requests
            for resource in request.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        ]


@pytest.fixture
def collector() -> Iterator[Collector]:
    serving = Collector()
    try:
        yield serving
    finally:
        serving.server.shutdown()
        serving.server.server_close()


def test_a_batch_of_two_runs_exports_two_traces(tmp_path: Path, collector: Collector) -> None:
    lines = []
    for n in range(2):
        directory = tmp_path / f"s{n}"
        directory.mkdir()
        path = write_scenario(directory, [{"assistant": {"text": "Done.", "stopReason": "stop"}}])
        lines.append(
            json.dumps(
                {
                    "command": [str(FAKE_PI), "--mode", "json", "-p", "--scenario", str(path)],
                    "task": f"task {n}",
                }
            )
        )
    spec = tmp_path / "spec.jsonl"
    spec.write_text("\n".join(lines) + "\n")
    proc = subprocess.run(
        [sys.executable, "-m", "wrapper", "batch", str(spec), "--runs-dir", "runs"],
        capture_output=True,
        timeout=HANG_LIMIT,
        env={
            **agent_env(tmp_path),
            "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint,
            "TRACEPARENT": CALLER_TRACEPARENT,
        },
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    runs = [span for span in collector.spans() if span.name.startswith("invoke_agent")]
    assert len(runs) == 2
    traces = {span.trace_id.hex() for span in runs}
    assert len(traces) == 2
    assert CALLER_TRACE not in traces
    for span in runs:
        # Each run's own trace, linked to the caller's.
        assert span.parent_span_id == b""
        assert [link.trace_id.hex() for link in span.links] == [CALLER_TRACE]
    attempts = [span for span in collector.spans() if span.name == "attempt 1"]
    assert {span.trace_id.hex() for span in attempts} == traces


def test_a_collector_that_never_answers_delays_the_exit_by_the_flush_bound_at_most(
    tmp_path: Path,
) -> None:
    scenario = write_scenario(tmp_path, [{"assistant": {"text": "Done.", "stopReason": "stop"}}])
    # Takes connections (the kernel's backlog) and never answers a request.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    bound = 1.0

    def timed(**env: str) -> tuple[float, subprocess.CompletedProcess[bytes]]:
        started = time.monotonic()
        proc = subprocess.run(
            wrapper_argv(tmp_path / "run", scenario, options=["--output", "quiet"]),
            capture_output=True,
            timeout=HANG_LIMIT,
            env={**agent_env(tmp_path), **env},
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        return time.monotonic() - started, proc

    try:
        plain, proc = timed()
        assert proc.returncode == 0, proc.stderr.decode()
        stuck, proc = timed(
            OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{silent.getsockname()[1]}",
            AGENT_WRAPPER_OTEL_FLUSH_TIMEOUT=str(bound),
        )
    finally:
        silent.close()
    assert proc.returncode == 0, proc.stderr.decode()
    assert read_result(tmp_path / "run" / "result.json")["outcome"] == "ok"
    # One line says so; the SDK's own complaints are not repeated on stderr.
    assert [line for line in proc.stderr.decode().splitlines() if line.strip()] == [
        "agent-wrapper: warning: OpenTelemetry: the collector did not take the runs' "
        "spans within 1 s (AGENT_WRAPPER_OTEL_FLUSH_TIMEOUT); they are dropped"
    ]
    # The SDK's own default would wait 10 s and more for that collector.
    assert stuck < plain + bound + 3.0, (plain, stuck)


#: A program embedding the API; with "logging" it configures logging (to its
#: stdout, so that its stderr shows what the wrapper would print unasked).
_API_HOST = """
import logging, sys, wrapper
how, run_dir, *command = sys.argv[1:]
if how == "logging":
    logging.basicConfig(stream=sys.stdout, format="LOG %(name)s %(levelname)s %(message)s")
result = wrapper.run(command, task="Do it", run_dir=run_dir)
print("OUTCOME", result.outcome)
"""


@pytest.mark.parametrize("how", ["silent", "logging"])
def test_the_api_says_nothing_on_the_hosts_stderr_when_the_collector_never_answers(
    tmp_path: Path, how: str
) -> None:
    # A tool span ends early and is exported (every 0.1 s) while the agent
    # still works: its loss is known before result.json is written.
    scenario = write_scenario(
        tmp_path,
        [
            {"assistant": {"toolCalls": [{"name": "bash"}]}},
            {"tool": {"name": "bash"}},
            {"sleep": 3.0},
            {"assistant": {"text": "Done.", "stopReason": "stop"}},
        ],
    )
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                _API_HOST,
                how,
                str(tmp_path / "run"),
                *[str(FAKE_PI), "--mode", "json", "-p", "--scenario", str(scenario)],
            ],
            capture_output=True,
            timeout=HANG_LIMIT,
            env={
                **agent_env(tmp_path),
                "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{silent.getsockname()[1]}",
                "AGENT_WRAPPER_OTEL_FLUSH_TIMEOUT": "0.5",
                "OTEL_BSP_SCHEDULE_DELAY": "100",
            },
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    finally:
        silent.close()
    out = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stderr == b""
    assert "OUTCOME ok" in out
    result = read_result(tmp_path / "run" / "result.json")
    assert [w["code"] for w in result["warnings"]] == ["telemetry"]
    assert "the collector did not take 1 span(s)" in result["warnings"][0]["message"]
    logged = [line for line in out.splitlines() if line.startswith("LOG ")]
    if how == "silent":
        assert logged == []
    else:
        # The host that configures logging hears of the spans lost at the
        # end (after result.json), and of the SDK's own complaints.
        assert (
            "LOG wrapper WARNING OpenTelemetry: the collector did not take the runs' spans "
            "within 0.5 s (AGENT_WRAPPER_OTEL_FLUSH_TIMEOUT); they are dropped"
        ) in logged
        assert any(line.startswith("LOG opentelemetry.") for line in logged), logged


@pytest.mark.parametrize("caller", [None, CALLER_TRACEPARENT])
def test_the_command_lines_agent_gets_its_attempts_span_as_traceparent(
    tmp_path: Path, collector: Collector, caller: str | None
) -> None:
    """The command line starts the agent before it loads OpenTelemetry: the
    span the agent is told of is the one exported."""
    scenario = write_scenario(tmp_path, [{"assistant": {"text": "Done.", "stopReason": "stop"}}])
    env = {**agent_env(tmp_path), "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint}
    if caller is not None:
        env["TRACEPARENT"] = caller
    proc = subprocess.run(
        wrapper_argv(tmp_path / "run", scenario, options=["--output", "quiet"]),
        capture_output=True,
        timeout=HANG_LIMIT,
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    spans = {span.name: span for span in collector.spans()}
    run_span, attempt = spans["invoke_agent pi"], spans["attempt 1"]
    trace = run_span.trace_id.hex()
    if caller is None:
        assert run_span.parent_span_id == b""
    else:
        assert trace == CALLER_TRACE
        assert run_span.parent_span_id.hex() == CALLER_SPAN
    assert attempt.parent_span_id == run_span.span_id
    (record,) = records(tmp_path)
    assert record["env"]["TRACEPARENT"] == f"00-{trace}-{attempt.span_id.hex()}-01"


@pytest.mark.parametrize(
    ("traceparent", "joins", "flags"),
    [
        (CALLER_TRACEPARENT, True, "01"),
        (f"00-{CALLER_TRACE}-{CALLER_SPAN}-00", True, "00"),
        (f"00-{'0' * 32}-{CALLER_SPAN}-01", False, "01"),
        (f"ff-{CALLER_TRACE}-{CALLER_SPAN}-01", False, "01"),
        ("not a traceparent", False, "01"),
    ],
)
def test_planned_ids_join_a_valid_callers_trace_only(
    traceparent: str, joins: bool, flags: str
) -> None:
    planned = trace_ids.plan_ids({"TRACEPARENT": traceparent})
    assert planned is not None
    version, trace, span, sampled = planned.traceparent.split("-")
    assert (trace == CALLER_TRACE) is joins
    assert (version, span, sampled) == ("00", f"{planned.attempt_span_id:016x}", flags)
    assert trace_ids.plan_ids({"OTEL_TRACES_SAMPLER": "traceidratio"}) is None


def test_a_failed_tool_and_a_failed_hook_are_error_spans(
    tmp_path: Path, exported: InMemorySpanExporter
) -> None:
    hook = tmp_path / "broken.py"
    hook.write_text("import sys\nsys.exit(1)\n")
    settings = tmp_path / "settings.json"
    settings.write_text(
        json.dumps(
            {
                "hooks": {
                    "Stop": [
                        {"hooks": [{"type": "command", "command": f"{sys.executable} {hook}"}]}
                    ]
                }
            }
        )
    )
    scenario = write_scenario(
        tmp_path,
        [
            {
                "assistant": {
                    "text": "Reading.",
                    "toolCalls": [{"name": "read", "arguments": {"path": "missing.txt"}}],
                }
            },
            {"tool": {"name": "read", "isError": True, "result": "no such file"}},
            {"assistant": {"text": "It is not there.", "stopReason": "stop"}},
            *END,
        ],
    )
    result = wrapper.run(
        [str(FAKE_PI), "--mode", "json", "-p", "--scenario", str(scenario)],
        task="Read it",
        run_dir=tmp_path / "run",
        settings=[str(settings)],
    )
    assert result.outcome == "ok", result.error
    spans = {span.name: span for span in exported.get_finished_spans()}
    tool, stop_hook = spans["execute_tool read"], spans["hook Stop"]
    assert dict(tool.attributes or {})["error.type"] == "tool_error"
    assert tool.status.status_code.name == "ERROR"
    hook_attrs = dict(stop_hook.attributes or {})
    assert hook_attrs["error.type"] == "hook_failed"
    assert hook_attrs["agent_wrapper.hook.exit_code"] == 1
    # Neither failure failed the run.
    assert "error.type" not in dict(spans["invoke_agent pi"].attributes or {})


def test_the_apis_env_alone_can_turn_the_export_on(
    tmp_path: Path, collector: Collector, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in list(os.environ):
        if name.startswith(("AGENT_WRAPPER_", "OTEL_")) or name in ("TRACEPARENT", "TRACESTATE"):
            monkeypatch.delenv(name)
    for name, value in agent_env(tmp_path).items():
        monkeypatch.setenv(name, value)
    scenario = write_scenario(tmp_path, [{"assistant": {"text": "Done.", "stopReason": "stop"}}])
    telemetry.use_exporter(None)  # a provider of this run's own making
    try:
        result = wrapper.run(
            [str(FAKE_PI), "--mode", "json", "-p", "--scenario", str(scenario)],
            task="Do it",
            run_dir=tmp_path / "run",
            env={"OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint},
        )
    finally:
        telemetry.use_exporter(None)
    assert result.outcome == "ok"
    # Flushed before the call returned.
    (run_span,) = [span for span in collector.spans() if span.name == "invoke_agent pi"]
    attrs = {kv.key: kv.value for kv in run_span.attributes}
    assert attrs["agent_wrapper.run_id"].string_value == result.data["runId"]
