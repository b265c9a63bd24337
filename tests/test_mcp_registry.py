"""The MCP server's runs and tools, without the protocol: what a client
would get back from each tool, against real runs of the fake agent."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio

from tests.conftest import FAKE_PI, agent_env, read_result, write_scenario
from wrapper.core import registry
from wrapper.core.jsonout import dumps
from wrapper.core.limits import MCP_ANSWER_MAX_CHARS
from wrapper.mcp.presets import PRESETS
from wrapper.mcp.registry import KNOWN_PROGRAMS, Policy, ToolError, open_runs
from wrapper.mcp.tools import Tools
from wrapper.options import options_from

pytestmark = pytest.mark.usefixtures("no_leaks")

END: list[dict[str, Any]] = [{"agent_end": {"willRetry": False}}, {"agent_settled": {}}]


def answer(text: str) -> list[dict[str, Any]]:
    return [{"assistant": {"text": text, "stopReason": "stop"}}, *END]


def long_tool(seconds: float = 40) -> dict[str, Any]:
    return {"tool": {"name": "bash", "duration": seconds, "result": "built"}}


def policy(tmp_path: Path, **changes: Any) -> Policy:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    path = f"{FAKE_PI.parent}{os.pathsep}{os.environ.get('PATH', os.defpath)}"
    environ = agent_env(tmp_path, HOME=str(home), PATH=path, **changes.pop("env", {}))
    values: dict[str, Any] = {
        "runs_dir": tmp_path / "runs",
        "cwd": tmp_path,
        "environ": environ,
        # A steer ends a running tool at once, not once it ended.
        "defaults": {"steer_timeout": 0.3},
    }
    values.update(changes)
    return Policy(**values)


def pi(
    tmp_path: Path,
    steps: Sequence[dict[str, Any]],
    resumes: Sequence[Sequence[dict[str, Any]]] = (),
    name: str = "s",
) -> list[str]:
    folder = tmp_path / name
    folder.mkdir()
    extra = {"resumes": [list(r) for r in resumes]} if resumes else {}
    scenario = write_scenario(folder, steps, **extra)
    return ["pi", "--mode", "json", "-p", "--scenario", str(scenario)]


@asynccontextmanager
async def server(tmp_path: Path, **changes: Any) -> AsyncIterator[Tools]:
    async with open_runs(policy(tmp_path, **changes), options_from, signals=False) as runs:
        yield Tools(runs, progress_every=0.1)


def fits(answer: dict[str, Any]) -> dict[str, Any]:
    # Every answer is JSON a client can send back as it is, within the bound.
    assert len(dumps(answer)) <= MCP_ANSWER_MAX_CHARS + 2000, len(dumps(answer))
    return answer


async def test_start_returns_at_once_and_the_run_goes_on_until_aborted(tmp_path: Path) -> None:
    async with server(tmp_path) as tools:
        command = pi(tmp_path, [long_tool(), *answer("Built it.")])
        before = time.monotonic()
        started = fits(await tools.start(command=command, task="Build it", label="builder"))
        assert time.monotonic() - before < 0.5
        run_id = started["run_id"]
        assert Path(started["run_dir"]) == tmp_path / "runs" / run_id
        assert started["state"] in ("starting", "running")

        ticks: list[tuple[float, str]] = []

        async def progress(elapsed: float, message: str) -> None:
            ticks.append((elapsed, message))

        waited = fits(await tools.wait(timeout=0.6, progress=progress))
        assert waited["timed_out"] is True
        assert waited["ended"] == []
        assert [r["run_id"] for r in waited["running"]] == [run_id]
        assert len(ticks) >= 3
        assert ticks[-1][1] == "1 of 1 runs still going"

        status = fits(await tools.status(run_id=run_id))
        assert status["label"] == "builder"
        assert status["state"] == "running"

        aborted = fits(await tools.abort(run_id=run_id, reason="not needed"))
        assert aborted["state"] == "ended"
        assert aborted["outcome"] == "aborted"
        result = fits(await tools.result(run_id=run_id))
        assert result["outcome"] == "aborted"
        assert result["error"]["kind"] == "abort_requested"
        # A second abort is refused, as the command line's is.
        again = await tools.abort(run_id=run_id)
        assert again["state"] == "refused"
        assert "not running" in again["why"]


async def test_wait_all_then_status_events_result_and_list(tmp_path: Path) -> None:
    async with server(tmp_path) as tools:
        first = await tools.start(command=pi(tmp_path, answer("One."), name="a"), task="A")
        second = await tools.start(
            command=pi(tmp_path, [{"sleep": 0.5}, *answer("Two.")], name="b"), task="B"
        )
        ids = [first["run_id"], second["run_id"]]
        waited = fits(await tools.wait(run_ids=ids, mode="all", timeout=60))
        assert waited["timed_out"] is False
        assert sorted(r["run_id"] for r in waited["ended"]) == sorted(ids)
        assert {r["final_text_preview"] for r in waited["ended"]} == {"One.", "Two."}
        assert all(r["outcome"] == "ok" for r in waited["ended"])

        status = await tools.status(run_id=ids[0])
        assert status["state"] == "finished"
        assert status["outcome"] == "ok"

        events = fits(await tools.events(run_id=ids[0]))
        types = [e["type"] for e in events["events"]]
        assert "assistant_message" in types
        assert types[-1] == "result_written"
        later = await tools.events(run_id=ids[0], since=events["events"][1]["seq"])
        assert later["events"] == events["events"][2:]

        listed = fits(await tools.list())
        assert [r["run_id"] for r in listed["runs"]] == ids[::-1]
        assert listed["total"] == 2

        result = fits(await tools.result(run_id=ids[1]))
        assert result["outcome"] == "ok"
        assert result["final_text"] == "Two."
        assert result["final_text_truncated"] is False
        assert Path(result["final_text_path"]).read_text() == "Two."
        assert read_result(Path(result["result_path"]))["finalText"] == "Two."


async def test_wait_any_returns_when_the_first_run_ends(tmp_path: Path) -> None:
    async with server(tmp_path) as tools:
        slow = await tools.start(command=pi(tmp_path, [long_tool()], name="a"), task="Slow")
        quick = await tools.start(command=pi(tmp_path, answer("Quick."), name="b"), task="Quick")
        waited = await tools.wait(timeout=60)
        assert [r["run_id"] for r in waited["ended"]] == [quick["run_id"]]
        assert [r["run_id"] for r in waited["running"]] == [slow["run_id"]]
        with pytest.raises(ToolError, match="still running"):
            await tools.result(run_id=slow["run_id"])


async def test_a_5_mb_final_text_is_cut_and_the_file_holds_it_whole(tmp_path: Path) -> None:
    text = "".join(f"line {n:07d} of the answer\n" for n in range(200_000))
    assert len(text) > 5_000_000
    async with server(tmp_path) as tools:
        # Two deltas: the fake's pi repeats the message so far in each one.
        steps = [{"assistant": {"text": text, "stopReason": "stop", "deltas": 2}}, *END]
        started = await tools.start(command=pi(tmp_path, steps), task="Write a lot")
        await tools.wait(timeout=120)
        result = fits(await tools.result(run_id=started["run_id"]))
        assert result["final_text"] == text[:20_000]
        assert result["final_text_truncated"] is True
        assert result["final_text_chars"] == len(text)
        assert Path(result["final_text_path"]).read_text() == text
        assert Path(result["final_text_path"]).parent == Path(started["run_dir"])
        longest = fits(await tools.result(run_id=started["run_id"], max_chars=25_000))
        assert len(longest["final_text"]) == 25_000
        with pytest.raises(ToolError, match="from 0 to 25000"):
            await tools.result(run_id=started["run_id"], max_chars=25_001)
        # Following the run a page at a time stays within the bound too.
        events = fits(await tools.events(run_id=started["run_id"]))
        assert events["events"]


async def test_a_steer_gets_the_steer_commands_receipt(tmp_path: Path) -> None:
    async with server(tmp_path) as tools:
        command = pi(tmp_path, [long_tool(), *answer("Built it.")], [answer("Steered.")])
        started = await tools.start(command=command, task="Build it")
        # As a parent would: steered once the agent is at work.
        with trio.fail_after(30):
            while (await tools.status(run_id=started["run_id"]))["current_tool"] is None:
                await trio.sleep(0.05)
        receipt = fits(await tools.steer(run_id=started["run_id"], text="Stop building; test"))
        assert receipt["state"] == "delivered", receipt
        assert receipt["how"] == "resume"
        assert receipt["attempt"] == 2
        assert set(receipt) == {"state", "id", "how", "why", "attempt", "outcome"}
        await tools.wait(timeout=60)
        result = await tools.result(run_id=started["run_id"])
        assert result["final_text"] == "Steered."
        assert result["outcome"] == "ok"
        refused = await tools.steer(run_id=started["run_id"], text="More")
        assert refused["state"] == "refused"


async def test_reply_answers_an_escalation(tmp_path: Path) -> None:
    async with server(tmp_path) as tools:
        command = pi(tmp_path, answer("Should I also drop the old API?"), [answer("Dropped it.")])
        started = await tools.start(command=command, task="Refactor", on_stop="escalate")
        run_id = started["run_id"]
        with trio.fail_after(30):
            while (status := await tools.status(run_id=run_id))["state"] != "waiting":
                await trio.sleep(0.05)
        assert "drop the old API" in status["question"]
        assert status["escalation_id"]
        with pytest.raises(ToolError, match="exactly one"):
            await tools.reply(run_id=run_id)
        replied = fits(await tools.reply(run_id=run_id, text="Yes, drop it"))
        assert replied == {
            "run_id": run_id,
            "escalation_id": status["escalation_id"],
            "answered": "text",
        }
        with pytest.raises(ToolError, match="already answered"):
            await tools.reply(run_id=run_id, stop=True, escalation_id=status["escalation_id"])
        # The policy asks again at the agent's next stop: this time it may stop.
        with trio.fail_after(30):
            while (await tools.status(run_id=run_id))["question"] != "Dropped it.":
                await trio.sleep(0.05)
        stopped = await tools.reply(run_id=run_id, stop=True)
        assert stopped["answered"] == "stop"
        assert stopped["escalation_id"] != status["escalation_id"]
        waited = await tools.wait(timeout=60)
        assert waited["ended"][0]["outcome"] == "ok"
        result = await tools.result(run_id=run_id)
        assert result["final_text"] == "Dropped it."
        assert result["steers"] == 1


async def test_refusals_say_which_option_allows_it(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    settings = outside / "hooks.json"
    settings.write_text('{"hooks": {}}')
    async with server(tmp_path, max_runs=1) as tools:
        with pytest.raises(ToolError, match="--allow /bin/echo"):
            await tools.start(command=["/bin/echo", "hi"], task="Say hi")
        with pytest.raises(ToolError, match="--allow-cwd"):
            await tools.start(command=pi(tmp_path, answer("x"), name="a"), task="T", cwd="/")
        with pytest.raises(ToolError, match="--allow-settings"):
            await tools.start(
                command=pi(tmp_path, answer("x"), name="b"), task="T", settings=str(settings)
            )
        with pytest.raises(ToolError, match="no run 'nope'"):
            await tools.status(run_id="nope")
        with pytest.raises(ToolError, match="no agent 'vim'"):
            await tools.start(agent="vim", task="T")
        with pytest.raises(ToolError, match="at most 300"):
            await tools.wait(timeout=301)
        await tools.start(command=pi(tmp_path, [long_tool()], name="c"), task="Long")
        with pytest.raises(ToolError, match=r"--max-runs 1\)"):
            await tools.start(command=pi(tmp_path, answer("x"), name="d"), task="T")
        # Nothing was started by the refused ones.
        assert (await tools.list())["total"] == 1


async def test_allowed_options_let_the_refused_starts_through(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    settings = outside / "hooks.json"
    settings.write_text('{"hooks": {}}')
    changes = {"allow": (str(FAKE_PI),), "allow_cwd": (outside,), "allow_settings": (outside,)}
    async with server(tmp_path, **changes) as tools:
        command = pi(tmp_path, answer("Fine."))
        command[0] = str(FAKE_PI)
        started = await tools.start(
            command=command, task="T", cwd=str(outside), settings=str(settings), timeout=60
        )
        await tools.wait(timeout=60)
        result = await tools.result(run_id=started["run_id"])
        assert result["outcome"] == "ok"
        config = orjson.loads((Path(started["run_dir"]) / "config.json").read_bytes())
        assert config["cwd"] == str(outside)


async def test_a_start_past_the_depth_is_refused_with_the_depth(tmp_path: Path) -> None:
    async with server(tmp_path, env={"AGENT_WRAPPER_DEPTH": "3"}) as tools:
        with pytest.raises(ToolError, match=r"nested 4 deep .*--max-depth"):
            await tools.start(command=pi(tmp_path, answer("x")), task="T")


async def test_an_agent_preset_starts_its_json_mode(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, answer("From the preset."))
    async with server(tmp_path, env={"FAKE_AGENT_SCENARIO": str(scenario)}) as tools:
        started = await tools.start(agent="pi", task="T")
        await tools.wait(timeout=60)
        result = await tools.result(run_id=started["run_id"])
        assert result["final_text"] == "From the preset."
        config = orjson.loads((Path(started["run_dir"]) / "config.json").read_bytes())
        assert config["command"][:4] == ["pi", "--mode", "json", "-p"]


async def test_closing_aborts_every_run_and_each_writes_its_result(tmp_path: Path) -> None:
    run_dirs = []
    async with server(tmp_path) as tools:
        for name in ("a", "b"):
            started = await tools.start(command=pi(tmp_path, [long_tool()], name=name), task="Long")
            run_dirs.append(Path(started["run_dir"]))
        with trio.fail_after(30):
            for run_dir in run_dirs:
                while (await tools.status(run_id=run_dir.name))["state"] != "running":
                    await trio.sleep(0.05)
        before = trio.current_time()
    assert trio.current_time() - before < 15
    for run_dir in run_dirs:
        result = read_result(run_dir / "result.json")
        assert result["outcome"] == "aborted"
        assert "the server that started it is closing" in result["error"]["message"]


async def test_a_stop_signal_aborts_every_run_and_no_more_start(tmp_path: Path) -> None:
    async with open_runs(policy(tmp_path), options_from) as runs:
        tools = Tools(runs)
        started = await tools.start(command=pi(tmp_path, [long_tool()]), task="Long")
        with trio.fail_after(30):
            while (await tools.status(run_id=started["run_id"]))["state"] != "running":
                await trio.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM)
        waited = await tools.wait(timeout=30)
        assert waited["ended"][0]["outcome"] == "aborted"
        with pytest.raises(ToolError, match="was stopped by SIGTERM: it starts no more runs"):
            await tools.start(command=pi(tmp_path, answer("x"), name="b"), task="T")
    result = read_result(Path(started["run_dir"]) / "result.json")
    assert result["outcome"] == "aborted"
    assert result["exitStatus"] == 128 + signal.SIGTERM


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_each_preset_is_a_command_line_the_wrapper_reads(name: str) -> None:
    preset = PRESETS[name]
    for command in (preset.command, preset.live):
        assert command is not None
        assert command[0] in KNOWN_PROGRAMS
        # In the mode its dialect reads: the run is not refused for it.
        assert registry.detect(command) is not None, command
        assert registry.lacks_mode(command) is None, command
    assert preset.posture
    assert set(preset.describe()) == {"agent", "command", "live_command", "posture"}


def test_events_are_read_a_page_at_a_time_from_where_the_last_page_ended(tmp_path: Path) -> None:
    from wrapper.mcp.tools import _read_events

    path = tmp_path / "events.jsonl"
    lines = [{"seq": n, "type": "tool_start", "name": f"t{n}"} for n in range(1, 501)]
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    # A line still being written is not read, nor passed over.
    with path.open("ab") as file:
        file.write(b'{"seq": 501, "type": "tool_')
    seen: list[int] = []
    since, cursor, more = 0, (0, 0), True
    while more:
        events, since, more, cursor = _read_events(path, since, 200, cursor)
        seen += [event["seq"] for event in events]
    assert seen == list(range(1, 501))
    assert cursor == (500, path.stat().st_size - len(b'{"seq": 501, "type": "tool_'))
    # Asked again from an earlier place, it reads from the start.
    events, _, _, _ = _read_events(path, 10, 5, cursor)
    assert [event["seq"] for event in events] == [11, 12, 13, 14, 15]
    with path.open("ab") as file:
        file.write(b'end"}\n')
    events, since, more, cursor = _read_events(path, since, 200, cursor)
    assert ([event["seq"] for event in events], since, more) == ([501], 501, False)


async def test_a_tool_that_waits_reports_progress_meanwhile(tmp_path: Path) -> None:
    said: list[tuple[float, str]] = []

    async def progress(elapsed: float, message: str) -> None:
        said.append((elapsed, message))

    async with server(tmp_path) as tools:
        started = await tools.start(command=pi(tmp_path, [long_tool()]), task="Build")
        waited = await tools.wait(timeout=0.6, progress=progress)
        assert waited["timed_out"]
        aborted = await tools.abort(run_id=started["run_id"], progress=progress)
        assert aborted["outcome"] == "aborted"
    waiting = [elapsed for elapsed, message in said if message == "1 of 1 runs still going"]
    assert len(waiting) >= 2
    assert waiting == sorted(waiting)
    assert {message for _, message in said} <= {"1 of 1 runs still going", "the run is ending"}


async def test_a_final_txt_planted_in_the_run_directory_is_replaced_not_read(
    tmp_path: Path,
) -> None:
    async with server(tmp_path) as tools:
        started = await tools.start(command=pi(tmp_path, answer("The real answer.")), task="T")
        await tools.wait(timeout=60)
        # The agent works in reach of its run directory: a FIFO nobody
        # writes would hang a reader; a link would hand on another file.
        planted = Path(started["run_dir"]) / "final.txt"
        os.mkfifo(planted)
        with trio.fail_after(10):
            result = await tools.result(run_id=started["run_id"])
        path = Path(result["final_text_path"])
        assert path.is_file()
        assert not path.is_symlink()
        assert path.read_text() == "The real answer."
