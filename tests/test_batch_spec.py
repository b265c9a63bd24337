"""A batch's spec and its reports, as the person writing the spec and the CI
system reading the reports see them."""

from __future__ import annotations

import argparse
import json
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wrapper.fleet.report import RunEntry, batch_json, junit_xml
from wrapper.fleet.spec import (
    SpecError,
    SpecRun,
    folder_names,
    parse_shard,
    parse_spec,
    shard,
)
from wrapper.options import run_parser

RUN_PARSER = run_parser()


def spec(tmp_path: Path, *lines: Any, defaults: list[str] | None = None) -> list[SpecRun]:
    text = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines)
    namespace, _ = RUN_PARSER.parse_known_args(defaults or [])
    return parse_spec(text, tmp_path, RUN_PARSER, namespace)


def error(tmp_path: Path, *lines: Any) -> str:
    with pytest.raises(SpecError) as caught:
        spec(tmp_path, *lines)
    return str(caught.value)


def test_a_line_sets_run_options_over_the_command_lines(tmp_path: Path) -> None:
    [first, second] = spec(
        tmp_path,
        {"command": ["pi", "--mode", "json"], "task": "one", "label": "first"},
        {"command": ["claude", "-p"], "timeout": 5, "maxSteers": "2", "hooksFailClosed": True},
        defaults=["--timeout", "60", "--grace", "1.5"],
    )
    assert first.command == ("pi", "--mode", "json")
    assert (first.options.task, first.options.label, first.options.timeout) == ("one", "first", 60)
    assert first.options.grace == 1.5
    assert (second.options.timeout, second.options.max_steers) == (5, 2)
    assert second.options.hooks_fail_closed is True
    assert (first.line, second.line, first.index, second.index) == (1, 2, 0, 1)


def test_paths_are_relative_to_the_spec_and_env_is_kept(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    [run] = spec(
        tmp_path,
        {
            "command": ["pi"],
            "cwd": "work",
            "runDir": "runs/a",
            "settings": ["hooks.json"],
            "taskFile": "task.md",
            "env": {"MODEL": "m"},
        },
    )
    assert run.cwd == tmp_path / "work"
    assert run.options.run_dir == str(tmp_path / "runs/a")
    assert run.options.settings == [str(tmp_path / "hooks.json")]
    assert run.options.task_file == str(tmp_path / "task.md")
    assert run.env == {"MODEL": "m"}


def test_blank_lines_are_not_runs(tmp_path: Path) -> None:
    runs = spec(tmp_path, "", {"command": ["a"]}, "   ", {"command": ["b"]})
    assert [(run.line, run.index) for run in runs] == [(2, 0), (4, 1)]


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("{not json", ["line 2", "not JSON"]),
        ("[1, 2]", ["line 2", "JSON object"]),
        ({"task": "x"}, ["line 2", '"command"']),
        ({"command": []}, ["line 2", '"command"']),
        ({"command": "pi -p"}, ["line 2", "list"]),
        ({"command": ["pi"], "timout": 3}, ["line 2", "'timout'", "did you mean 'timeout'"]),
        ({"command": ["pi"], "timeout": -1}, ["line 2", "'timeout'"]),
        ({"command": ["pi"], "timeout": True}, ["line 2", "'timeout'"]),
        ({"command": ["pi"], "dialect": "nope"}, ["line 2", "'dialect' must be one of"]),
        ({"command": ["pi"], "subagent": "yes"}, ["line 2", "true or false"]),
        ({"command": ["pi"], "env": {"A": 1}}, ["line 2", '"env"']),
        ({"command": ["pi"], "cwd": "missing"}, ["line 2", "is not a directory"]),
        ({"command": ["pi"], "task": "a", "taskFile": "b"}, ["line 2", "cannot both"]),
        ({"command": ["pi"], "taskFile": "-"}, ["line 2", "standard input"]),
        ({"command": ["pi"], "output": "jsonl"}, ["line 2", "unknown key 'output'"]),
        ('{"command": ["pi"], "x": ' + "[" * 100_000 + "]" * 100_000 + "}", ["line 2", "deep"]),
        ({"command": ["pi", "-p\0"]}, ["line 2", '"command": argument 1', "NUL"]),
        ({"command": ["pi"], "runDir": "runs/a\0b"}, ["line 2", "'runDir'", "NUL"]),
        ({"command": ["pi"], "result": "r\0.json"}, ["line 2", "'result'", "NUL"]),
        ({"command": ["pi"], "task": "do\0it"}, ["line 2", "'task'", "NUL"]),
        ({"command": ["pi"], "label": "a\0b"}, ["line 2", "'label'", "NUL"]),
        ({"command": ["pi"], "label": "a\ud800"}, ["line 2", "'label'", "surrogate"]),
        ({"command": ["pi"], "settings": ["a\0"]}, ["line 2", "'settings'", "NUL"]),
        ({"command": ["pi"], "cwd": "a\0b"}, ["line 2", '"cwd"', "NUL"]),
        ({"command": ["pi"], "env": {"A": "a\0b"}}, ["line 2", '"env"', "'A'", "value", "NUL"]),
        ({"command": ["pi"], "env": {"A\0": "b"}}, ["line 2", '"env"', "name", "NUL"]),
        ({"command": ["pi"], "env": {"A=B": "b"}}, ["line 2", '"env"', "not a variable name"]),
        ({"command": ["pi"], "timeout": [[[1]]]}, ["line 2", "'timeout'", "not a list"]),
    ],
)
def test_a_wrong_line_is_named_before_anything_starts(
    tmp_path: Path, line: Any, words: list[str]
) -> None:
    message = error(tmp_path, {"command": ["fine"]}, line)
    for word in words:
        assert word in message


def test_an_empty_spec_says_what_a_line_looks_like(tmp_path: Path) -> None:
    assert '{"command"' in error(tmp_path, "", "  ")


@given(count=st.integers(1, 7), size=st.integers(0, 30))
def test_shards_split_the_spec_exactly(count: int, size: int) -> None:
    runs = [SpecRun(i, i + 1, ("a",), argparse.Namespace(label=None), Path()) for i in range(size)]
    seen = [run.index for i in range(1, count + 1) for run in shard(runs, i, count)]
    assert sorted(seen) == list(range(size))


@pytest.mark.parametrize("text", ["0/3", "4/3", "1/0", "x", "1-3", ""])
def test_a_wrong_shard_says_how_to_write_one(text: str) -> None:
    with pytest.raises(SpecError, match="--shard"):
        parse_shard(text)


def test_shard_text_is_read() -> None:
    assert parse_shard("2/5") == (2, 5)


def test_folders_are_safe_unique_names(tmp_path: Path) -> None:
    runs = spec(
        tmp_path,
        {"command": ["a"], "label": "fix the bug"},
        {"command": ["a"], "label": "Fix the bug"},
        {"command": ["a"]},
        {"command": ["a"], "label": "../../etc"},
        {"command": ["a"], "label": "..."},
        {"command": ["a"], "label": "3"},
    )
    names = folder_names(runs)
    assert names == ["fix-the-bug", "Fix-the-bug-2", "3", "etc", "5", "3-2"]
    assert all("/" not in name and not name.startswith(".") for name in names)


def entry(name: str, result: dict[str, Any] | None, duration: float = 1.5) -> RunEntry:
    return RunEntry(name, name, 1, f"/runs/{name}", result, duration)


OK = {"runId": "r1", "outcome": "ok", "exitStatus": 0, "stopReason": "stop", "error": None}
FAILED = {
    "runId": "r2",
    "outcome": "error",
    "exitStatus": 1,
    "stopReason": "error",
    "error": {"kind": "agent_error", "message": "rate limited \x1b[31m", "apiStatus": 429},
}


def test_junit_has_a_testcase_per_run_and_a_failure_with_the_error() -> None:
    root = ET.fromstring(junit_xml([entry("good", OK), entry("bad", FAILED), entry("lost", None)]))
    suite = root.find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures")) == ("3", "2")
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert cases["good"].find("failure") is None
    bad = cases["bad"].find("failure")
    assert bad is not None
    assert bad.get("type") == "agent_error"
    assert (bad.get("message") or "").startswith("rate limited")
    lost = cases["lost"].find("failure")
    assert lost is not None
    assert "no result.json" in (lost.get("message") or "")


def test_batch_json_lists_every_run_and_counts_outcomes() -> None:
    report = batch_json(
        [entry("good", OK), entry("bad", FAILED)],
        started_at="2026-01-01T00:00:00Z",
        ended_at="2026-01-01T00:01:00Z",
        exit_status=1,
    )
    assert report["outcomes"] == {"ok": 1, "error": 1}
    assert report["success"] is False
    assert [r["outcome"] for r in report["results"]] == ["ok", "error"]
    assert report["results"][1]["error"]["kind"] == "agent_error"
    assert report["results"][0]["durationMs"] == 1500


def test_no_run_folder_takes_the_batch_reports_name(tmp_path: Path) -> None:
    runs = spec(tmp_path, {"command": ["a"], "label": "batch.json"}, {"command": ["b"]})
    assert folder_names(runs) == ["batch.json-2", "2"]


def test_folder_naming_of_many_lines_with_one_label_is_unique_and_stays_quick() -> None:
    size = 20_000
    runs = [
        SpecRun(i, i + 1, ("a",), argparse.Namespace(label="same"), Path()) for i in range(size)
    ]
    # Lines whose own labels are what a repeat would be named also stay apart.
    runs += [
        SpecRun(size + i, size + i + 1, ("a",), argparse.Namespace(label=f"SAME-{i + 2}"), Path())
        for i in range(3)
    ]
    started = time.monotonic()
    names = folder_names(runs)
    # Generous: catches a naming that goes quadratic again (minutes), not speed.
    assert time.monotonic() - started < 30
    assert names[:3] == ["same", "same-2", "same-3"]
    assert names[size - 1] == f"same-{size}"
    assert names[size:] == ["SAME-2-2", "SAME-3-2", "SAME-4-2"]
    assert len({name.lower() for name in names}) == len(names)
    assert folder_names(runs) == names


HOSTILE = [
    "tab\there",
    "bell\x07 and escape \x1b[31m",
    "nul\x00",
    "lone surrogate \ud800 and \udfff",
    "not characters \ufffe\uffff",
    'markup <a href="x">&amp;</a> ]]> \'',
    "astral \U0001f600 kept",
    "vertical\x0bform\x0cfeed",
]


def readable(text: str) -> str:
    """What an XML reader must get back from ``text``: every character XML
    1.0 cannot carry replaced by U+FFFD."""
    return "".join(
        "\ufffd"
        if (ord(ch) < 0x20 and ch not in "\t\n\r")
        or 0xD800 <= ord(ch) <= 0xDFFF
        or ch in "\ufffe\uffff"
        else ch
        for ch in text
    )


def hostile_entry(text: str) -> RunEntry:
    result = {
        "runId": "r",
        "outcome": "error",
        "exitStatus": 1,
        "stopReason": text,
        "error": {"kind": text, "message": text},
    }
    return RunEntry(text, text, 1, f"/runs/{text}", result, 0.5)


@pytest.mark.parametrize("text", HOSTILE)
def test_junit_stays_well_formed_whatever_the_labels_and_errors_hold(text: str) -> None:
    root = ET.fromstring(junit_xml([hostile_entry(text), entry("good", OK)]))
    [case, good] = root.iter("testcase")
    assert case.get("name") == readable(text)
    assert good.get("name") == "good"
    failure = case.find("failure")
    assert failure is not None
    assert failure.get("message") == readable(text)
    assert failure.get("type") == readable(text)
    out = case.find("system-out")
    assert out is not None
    said = readable(f"run directory: /runs/{text}")
    assert (out.text or "").replace("\r", "\n") == said.replace("\r", "\n")


@given(st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, categories=None)))
def test_junit_is_readable_xml_for_any_label(text: str) -> None:
    root = ET.fromstring(junit_xml([hostile_entry(text)]))
    [case] = root.iter("testcase")
    assert case.get("name") == readable(text)
