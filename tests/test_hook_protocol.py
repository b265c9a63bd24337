"""The hook protocol, settings and steering rules, without processes."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from wrapper.core.hook_protocol import (
    Decision,
    HandlerResult,
    find_verdict,
    interpret_command,
    interpret_verdict,
    looks_like_failure,
)
from wrapper.core.policy import Allow, Escalate, Fail, Nudge, StopPolicy
from wrapper.core.settings import (
    KNOWN_EVENTS,
    IdleSettings,
    MatcherGroup,
    SettingsError,
    near_miss,
)
from wrapper.core.shellwords import ShellSyntax, split_command
from wrapper.core.spelling import edit_distance
from wrapper.core.steering import AllowedBy, Steering
from wrapper.files.settings_file import load_settings
from wrapper.files.transcript import TAIL_BLOCK_BYTES, last_assistant_message

# -- the answer of a command handler -------------------------------------------------


def answer(stdout: str = "", exit_code: int = 0, stderr: str = "") -> HandlerResult:
    return interpret_command(exit_code=exit_code, stdout=stdout.encode(), stderr=stderr.encode())


def test_exit_0_without_output_or_with_plain_text_allows() -> None:
    assert answer().decision is Decision.ALLOW
    plain = answer("checked 3 files")
    assert (plain.decision, plain.warning, plain.context) == (Decision.ALLOW, None, None)


def test_plain_text_is_context_only_for_prompt_events() -> None:
    result = interpret_command(
        exit_code=0, stdout=b"Use tabs.\n", stderr=b"", plain_text_is_context=True
    )
    assert result.context == "Use tabs."


def test_block_forms() -> None:
    assert answer(json.dumps({"decision": "block", "reason": "Run tests"})).reason == "Run tests"
    assert answer(json.dumps({"allow": False, "prompt": "Lint"})).reason == "Lint"
    by_exit = answer(exit_code=2, stderr="  Fix the build \n")
    assert (by_exit.decision, by_exit.reason) == (Decision.BLOCK, "Fix the build")


def test_continue_false_wins_over_block() -> None:
    result = answer(
        json.dumps({"decision": "block", "reason": "x", "continue": False, "stopReason": "Out"})
    )
    assert (result.decision, result.reason) == (Decision.END, "Out")


@pytest.mark.parametrize(
    ("stdout", "exit_code", "stderr", "warning"),
    [
        ('{"decision": "block"}', 0, "", "without a reason"),
        ('{"allow": false}', 0, "", "without a prompt"),
        ('{"decision": "block", "reason": "  "}', 0, "", "without a reason"),
        ("{oops", 0, "", "malformed JSON"),
        ("[1, 2]", 0, "", None),
        ("", 2, "", "gave no reason"),
        ("", 1, "Traceback: boom", "exited with status 1: Traceback: boom"),
        ("", -9, "", "killed by signal 9"),
    ],
)
def test_failures_allow_with_a_warning(
    stdout: str, exit_code: int, stderr: str, warning: str | None
) -> None:
    result = answer(stdout, exit_code, stderr)
    assert result.decision is Decision.ALLOW
    if warning is None:
        assert result.warning is None
    else:
        assert result.warning is not None
        assert warning in result.warning


def test_extend_max_steers_and_context_are_read() -> None:
    result = answer(
        json.dumps({"extendMaxSteers": 5, "hookSpecificOutput": {"additionalContext": "Be brief."}})
    )
    assert (result.extend_max_steers, result.context) == (5, "Be brief.")
    assert answer(json.dumps({"extendMaxSteers": -1})).extend_max_steers is None
    assert answer(json.dumps({"extendMaxSteers": True})).extend_max_steers is None


def test_verdicts_are_found_in_prose_and_fences() -> None:
    assert find_verdict('Looks fine.\n```json\n{"ok": true}\n```') == {"ok": True}
    nested = 'x {"ok": false, "reason": "r", "detail": {"a": {"b": 1}}} y'
    assert find_verdict(nested) == {"ok": False, "reason": "r", "detail": {"a": {"b": 1}}}
    assert find_verdict('{"ok": "yes"}') is None
    assert find_verdict("{" * 20000 + "}" * 20000) is None
    assert interpret_verdict('{"ok": false, "reason": "No tests."}').reason == "No tests."
    assert interpret_verdict('{"ok": false}').warning is not None
    impossible = interpret_verdict('{"ok": false, "reason": "r", "impossible": true}')
    assert impossible.decision is Decision.ALLOW


def test_error_retry_words() -> None:
    assert looks_like_failure("I was unable to compile: TypeError")
    assert not looks_like_failure("Fixed the error; tests pass.")
    assert not looks_like_failure("All done.")


# -- steering decisions ----------------------------------------------------------------


def test_steering_takes_the_first_block_and_extends_the_limit() -> None:
    steering = Steering(max_steers=1)
    results = [
        HandlerResult(decision=Decision.ALLOW, extend_max_steers=4),
        HandlerResult(decision=Decision.BLOCK, reason="again"),
    ]
    block = steering.decide(results, ["a", "b"])
    assert block is not None
    assert (block.handler, block.reason) == ("b", "again")
    assert steering.max_steers == 4
    steering.decide([HandlerResult(decision=Decision.ALLOW, extend_max_steers=2)], ["a"])
    assert steering.max_steers == 4, "extendMaxSteers never lowers the limit"
    steering.decide([HandlerResult(decision=Decision.ALLOW, extend_max_steers=10**6)], ["a"])
    assert steering.max_steers == 100


def test_steering_records_end_and_allow() -> None:
    steering = Steering(max_steers=3)
    assert steering.decide([HandlerResult(decision=Decision.END, reason="bye")], ["a"]) is None
    assert (steering.allowed_by, steering.stop_message) == (AllowedBy.HOOK_CONTINUE_FALSE, "bye")
    steering.decide([HandlerResult(decision=Decision.ALLOW)], ["a"])
    assert steering.allowed_by is AllowedBy.HANDLERS


def test_at_the_limit_a_block_says_the_gate_failed_and_steers_nothing() -> None:
    steering = Steering(max_steers=0)
    results = [
        HandlerResult(decision=Decision.ALLOW, extend_max_steers=4),
        HandlerResult(decision=Decision.BLOCK, reason="still no tests"),
    ]
    block = steering.decide_at_limit(results, ["a", "b"])
    assert block is not None
    assert (block.handler, block.reason) == ("b", "still no tests")
    assert (steering.allowed_by, steering.steer_count) == (AllowedBy.MAX_STEERS, 0)
    assert steering.max_steers == 0, "a block at the limit cannot buy more steers"
    assert steering.decide_at_limit([HandlerResult(decision=Decision.ALLOW)], ["a"]) is None
    assert steering.allowed_by is AllowedBy.HANDLERS
    ended = steering.decide_at_limit([HandlerResult(decision=Decision.END, reason="bye")], ["a"])
    assert ended is None
    assert (steering.allowed_by, steering.stop_message) == (AllowedBy.HOOK_CONTINUE_FALSE, "bye")


def test_error_retry_is_bounded_by_max_retries() -> None:
    steering = Steering(max_steers=5)
    block = steering.retry_on_error("Traceback: failed", max_retries=1)
    assert block is not None
    steering.record(block, 2)
    assert steering.retry_on_error("Traceback: failed", max_retries=1) is None
    assert steering.to_json()["steers"][0]["handler"] == "retryOnError"


# -- settings ---------------------------------------------------------------------------


def write(tmp_path: Path, name: str, data: object) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def test_settings_merge_and_notes(tmp_path: Path) -> None:
    first = write(
        tmp_path,
        "a.json",
        {
            "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "one"}]}]},
            "stop": {"retryOnError": True},
            "permissions": {"allow": ["Bash"]},
        },
    )
    second = write(
        tmp_path,
        "b.json",
        {
            "hooks": {
                "Stop": [{"hooks": [{"type": "command", "args": ["two", "x y"]}]}],
                "PreToolUse": [{"hooks": [{"type": "command", "command": "three"}]}],
            },
            "stop": {"maxSteers": 4},
        },
    )
    settings = load_settings([first, second])
    assert [h.name for h in settings.handlers("Stop")] == ["one", "two x y"]
    assert settings.handlers("PreToolUse") == []
    assert settings.max_steers == 4
    assert settings.retry_on_error is False, "a later stop object replaces the earlier one"
    assert any("permissions" in note and "skipped" in note for note in settings.notes)
    assert any("PreToolUse" in note and "NOT ENFORCED" in note for note in settings.notes)


def test_disable_all_hooks_is_honoured(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "s.json",
        {"disableAllHooks": True, "hooks": {"Stop": [{"hooks": [{"command": "x"}]}]}},
    )
    settings = load_settings([path])
    assert settings.handlers("Stop") == []
    assert any("disableAllHooks" in note for note in settings.notes)


def test_settings_errors_name_file_and_key(tmp_path: Path) -> None:
    path = write(tmp_path, "s.json", {"hooks": {"Stop": [{"hooks": [{"command": "a && b"}]}]}})
    with pytest.raises(SettingsError) as caught:
        load_settings([path])
    message = str(caught.value)
    assert str(path) in message
    assert "hooks.Stop[0].hooks[0].command" in message
    assert '"shell": true' in message
    with pytest.raises(SettingsError, match="cannot read it"):
        load_settings([tmp_path / "missing.json"])


@pytest.mark.parametrize(
    ("matcher", "tool", "expected"),
    [
        (None, "bash", True),
        ("", "bash", True),
        ("*", "Edit", True),
        ("Edit|Write", "Write", True),
        ("Edit|Write", "WriteFile", False),
        ("Edit", "edit", False),
        ("Notebook.*", "NotebookEdit", True),
        ("mcp__.*__read", "mcp__fs__read", True),
        ("mcp__.*__read", "mcp__fs__write", False),
    ],
)
def test_matchers(matcher: str | None, tool: str, expected: bool) -> None:
    assert MatcherGroup(matcher, ()).matches(tool) is expected


# -- command splitting --------------------------------------------------------------------


def test_split_like_a_shell() -> None:
    env = {"HOME": "/home/u", "DIR": "/a b"}
    assert split_command("""python3 "$DIR/x.py" 'it''s' a\\ b ${DIR} ~/y $""", env) == [
        "python3",
        "/a b/x.py",
        "its",
        "a b",
        "/a b",
        "/home/u/y",
        "$",
    ]
    assert split_command('echo "a\\"b" $MISSING', env) == ["echo", 'a"b', ""]


@pytest.mark.parametrize(
    "text", ["a | b", "a && b", "a; b", "a > f", "X=1 a", "a $(b)", "a `b`", "a 'open", "# c", ""]
)
def test_shell_syntax_is_refused(text: str) -> None:
    with pytest.raises(ShellSyntax):
        split_command(text, {})


@given(st.text())
def test_splitting_never_fails_otherwise(text: str) -> None:
    with contextlib.suppress(ShellSyntax):
        split_command(text, {"HOME": "/h"})


# -- transcripts ------------------------------------------------------------------------------


def test_last_assistant_message_from_the_tail(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    lines = [
        {"type": "session", "id": "s"},
        {
            "type": "message",
            "message": {"role": "assistant", "content": [{"type": "text", "text": "old"}]},
        },
        {"type": "message", "message": {"role": "user", "content": "x" * (3 * TAIL_BLOCK_BYTES)}},
        {
            "type": "assistant",
            "message": {"role": "assistant", "content": [{"type": "text", "text": "new"}]},
        },
        {"type": "assistant", "message": {"role": "assistant", "content": [{"type": "tool_use"}]}},
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n{torn line")
    assert last_assistant_message(path) == "new"
    path.write_text("\n".join(json.dumps(line) for line in lines[:3]))
    assert last_assistant_message(path) == "old", "a line longer than a block is read whole"
    assert last_assistant_message(path, limit=100) is None
    assert last_assistant_message(tmp_path / "missing") is None
    events = tmp_path / "events.jsonl"
    events.write_text(json.dumps({"type": "assistant_message", "text": "from events"}) + "\n")
    assert last_assistant_message(events) == "from events"


@given(st.lists(st.binary(max_size=50), max_size=30))
def test_transcript_reader_survives_any_bytes(
    tmp_path_factory: pytest.TempPathFactory, chunks: list[bytes]
) -> None:
    path = tmp_path_factory.mktemp("t") / "junk.jsonl"
    path.write_bytes(b"\n".join(chunks))
    last_assistant_message(path)


# -- stop policies (pure) --------------------------------------------------------------------


def decide(policy: StopPolicy, signals: list[dict[str, object]], **kw: object) -> object:
    args: dict[str, object] = {"at_limit": False, "tool_runs": 0, "signal_help": "help"}
    args.update(kw)
    return policy.decide(signals=signals, last_text="last", **args)  # type: ignore[arg-type]


def test_allow_policy_ignores_signals() -> None:
    assert decide(StopPolicy(), [{"kind": "escalate"}]) is None


def test_signal_policy() -> None:
    policy = StopPolicy(on_stop="signal")
    assert decide(policy, []) == Nudge("onStop:signal", "help")
    assert decide(policy, [{"kind": "continue"}]) == Nudge("onStop:signal", "help")
    assert decide(policy, [{"kind": "escalate", "message": "Q?"}]) == Escalate("Q?")
    done = decide(policy, [{"kind": "complete", "message": "ok"}, {"kind": "continue"}])
    assert done == Allow(AllowedBy.SIGNAL), "a complete signal wins over later ones"
    failed = decide(StopPolicy(on_stop="signal"), [], at_limit=True)
    assert isinstance(failed, Fail)
    assert failed.kind == "no_completion_signal"


def test_idle_nudges_reset_on_progress_then_escalate() -> None:
    policy = StopPolicy(on_stop="idle", idle=IdleSettings(attempts=1, cooldown=2))
    assert decide(policy, [], tool_runs=3) == Nudge("onIdle", IdleSettings().message, 2)
    assert decide(policy, [], tool_runs=5) == Nudge("onIdle", IdleSettings().message, 2)
    assert decide(policy, [], tool_runs=5) == Escalate("last")
    forever = StopPolicy(on_stop="idle", idle=IdleSettings(attempts=None))
    assert isinstance(decide(forever, []), Nudge)
    assert decide(forever, [], at_limit=True) == Allow(AllowedBy.MAX_STEERS)


def test_policy_settings_are_validated(tmp_path: Path) -> None:
    good = write(
        tmp_path,
        "good.json",
        {"onStop": "idle", "onIdle": {"action": "nudge", "attempts": "forever", "cooldown": 1}},
    )
    loaded = load_settings([good])
    assert (loaded.on_stop, loaded.idle.attempts, loaded.idle.cooldown) == ("idle", None, 1.0)
    assert loaded.observer_drain == 5.0
    drained = load_settings([write(tmp_path, "drain.json", {"observers": {"drainTimeout": 0}})])
    assert drained.observer_drain == 0.0
    for bad, where in [
        ({"onStop": "later"}, "onStop"),
        ({"onIdle": {"action": "sleep"}}, "onIdle.action"),
        ({"onIdle": {"attempts": 0}}, "onIdle.attempts"),
        ({"onIdle": {"tries": 1}}, "onIdle.tries"),
        ({"notify": {"command": []}}, "notify.command"),
        ({"summarizer": {}}, "summarizer"),
        ({"summarizer": {"command": ["s"], "timeout": 0}}, "summarizer.timeout"),
        ({"onIdle": {"cooldown": -1}}, "onIdle.cooldown"),
        ({"observers": {"drainTimeout": "5"}}, "observers.drainTimeout"),
        ({"observers": {"drain": 5}}, "observers.drain"),
    ]:
        with pytest.raises(SettingsError, match=where.replace(".", r"\.")):
            load_settings([write(tmp_path, "bad.json", bad)])


@pytest.mark.parametrize(
    ("name", "meant"),
    [
        ("stop", "Stop"),
        ("Stopp", "Stop"),
        ("Sotp", "Stop"),
        ("SubagentStrat", "SubagentStart"),
        ("userpromptsubmit", "UserPromptSubmit"),
        ("PreCompcat", "PreCompact"),
        ("BeforeDeploy", None),
        ("Start", None),
    ],
)
def test_near_misses_of_known_events(name: str, meant: str | None) -> None:
    assert near_miss(name) == meant


def test_every_known_event_loads_even_when_close_to_another(tmp_path: Path) -> None:
    """``Setup`` is two edits from ``Stop``: a known name is never a typo."""
    for event in sorted(KNOWN_EVENTS):
        path = write(tmp_path, f"{event}.json", {"hooks": {event: [{"hooks": [{"command": "x"}]}]}})
        load_settings([path])


@given(st.text(max_size=12), st.text(max_size=12), st.text(max_size=12))
def test_edit_distance_is_a_distance(a: str, b: str, c: str) -> None:
    assert edit_distance(a, a) == 0
    assert edit_distance(a, b) == edit_distance(b, a)
    assert edit_distance(a, b) <= max(len(a), len(b))
    assert abs(len(a) - len(b)) <= edit_distance(a, b)
    if a != b:
        assert edit_distance(a, b) >= 1


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)
EVENT_KEYS = st.sampled_from(
    ["hook_event_name", "cwd", "transcript_path", "tool_name", "last_assistant_message"]
)


@hypothesis_settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(value=JSON | st.dictionaries(EVENT_KEYS, JSON, max_size=4))
def test_hook_test_takes_any_json_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: object
) -> None:
    from wrapper.commands.hook_test import hook_test
    from wrapper.core.settings import Settings

    path = tmp_path / "event.json"
    path.write_text(json.dumps(value))
    status = hook_test(Settings(), str(path))
    out, err = capsys.readouterr()
    assert status in (0, 2)
    if status == 2:
        assert len(err.splitlines()) == 1
    else:
        assert json.loads(out)["decision"] == "allow"
