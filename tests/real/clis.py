"""The real agent CLIs of the conformance tier: package, pinned version, and
how to run each one offline against the mock model server.

Each CLI gets an isolated HOME (and its own config directory inside it)
holding a configuration that points it at the mock on 127.0.0.1, with its
telemetry, update checks and model-list fetching switched off. ``argv`` is the
COMMAND a user would give the wrapper: the agent in its JSON mode with the
flags an unattended run needs; the wrapper inserts the task.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

#: Where scripts/conformance installs the CLIs: one directory per
#: ``<package>@<version>`` (the scope's ``/`` becomes ``+``).
DEFAULT_CACHE = Path.home() / ".cache" / "agent-wrapper" / "clis"

#: The model name every CLI is told to use; the mock answers for any name.
MOCK_MODEL = "mock-model"
MOCK_KEY = "mock-key-not-secret"


@dataclass(frozen=True, slots=True)
class Setup:
    """What one run of a CLI needs: extra environment and its COMMAND."""

    env: dict[str, str]
    argv: list[str]


@dataclass(frozen=True, slots=True)
class Cli:
    name: str
    #: The wrapper's dialect for it.
    dialect: str
    package: str
    #: The pinned version: the one the grace defaults were measured on and
    #: the ACP cases run.
    version: str
    #: The executable: a name in the package's ``node_modules/.bin``, or a
    #: path under the install directory for a package that declares no bin.
    bin: str
    #: (home, mock base URL without a trailing slash, executable) -> Setup.
    configure: Callable[[Path, str, str], Setup]
    #: Further pinned versions that run every case too (a CLI's current
    #: release next to the one the table was written on).
    more_versions: tuple[str, ...] = ()

    @property
    def versions(self) -> tuple[str, ...]:
        return (self.version, *self.more_versions)

    def install_dir(self, cache: Path, version: str | None = None) -> Path:
        spec = f"{self.package}@{version or self.version}"
        return cache / spec.lstrip("@").replace("/", "+")

    def executable(self, cache: Path, version: str | None = None) -> Path:
        if "/" in self.bin:
            return self.install_dir(cache, version) / self.bin
        return self.install_dir(cache, version) / "node_modules" / ".bin" / self.bin


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


#: Variables every CLI gets: no colours, no update notices from npm itself.
COMMON_ENV = {
    "NO_COLOR": "1",
    "NO_UPDATE_NOTIFIER": "1",
    "NPM_CONFIG_UPDATE_NOTIFIER": "false",
    "CI": "1",
}


def _pi(home: Path, base: str, exe: str) -> Setup:
    agent_dir = home / ".pi" / "agent"
    models = {
        "providers": {
            "mock": {
                "baseUrl": f"{base}/v1",
                "api": "openai-completions",
                "apiKey": MOCK_KEY,
                "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
                "models": [{"id": MOCK_MODEL, "reasoning": False, "maxTokens": 4096}],
            }
        }
    }
    _write(agent_dir / "models.json", json.dumps(models, indent=2))
    _write(agent_dir / "settings.json", json.dumps({"enableInstallTelemetry": False}))
    env = {
        "PI_CODING_AGENT_DIR": str(agent_dir),
        "PI_OFFLINE": "1",
        "PI_SKIP_VERSION_CHECK": "1",
        "PI_TELEMETRY": "0",
    }
    argv = [exe, "--mode", "json", "-p", "--provider", "mock", "--model", MOCK_MODEL]
    return Setup(env, argv)


def _claude(home: Path, base: str, exe: str) -> Setup:
    config = home / ".claude"
    config.mkdir(parents=True, exist_ok=True)
    env = {
        "ANTHROPIC_BASE_URL": base,
        "ANTHROPIC_API_KEY": MOCK_KEY,
        "CLAUDE_CONFIG_DIR": str(config),
        # Root may skip permission prompts only inside a declared sandbox.
        "IS_SANDBOX": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_BUG_COMMAND": "1",
        "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1",
    }
    argv = [
        exe,
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--dangerously-skip-permissions",
        "--model",
        "claude-sonnet-4-5",
    ]
    return Setup(env, argv)


def _codex(home: Path, base: str, exe: str) -> Setup:
    codex_home = home / ".codex"
    config = f"""\
model = "{MOCK_MODEL}"
model_provider = "mock"
check_for_update_on_startup = false

[model_providers.mock]
name = "mock"
base_url = "{base}/v1"
wire_api = "responses"
env_key = "MOCK_API_KEY"
request_max_retries = 4
stream_max_retries = 2
stream_idle_timeout_ms = 30000

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"
"""
    _write(codex_home / "config.toml", config)
    env = {"CODEX_HOME": str(codex_home), "MOCK_API_KEY": MOCK_KEY}
    argv = [
        exe,
        "exec",
        "--json",
        "--dangerously-bypass-approvals-and-sandbox",
        "--skip-git-repo-check",
    ]
    return Setup(env, argv)


def _gemini(home: Path, base: str, exe: str) -> Setup:
    settings = {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
    }
    _write(home / ".gemini" / "settings.json", json.dumps(settings, indent=2))
    env = {
        "GOOGLE_GEMINI_BASE_URL": base,
        "GEMINI_API_KEY": MOCK_KEY,
        "GEMINI_CLI_NO_RELAUNCH": "true",
    }
    argv = [
        exe,
        "--output-format",
        "stream-json",
        "--skip-trust",
        "--yolo",
        "-m",
        "gemini-2.5-flash",
    ]
    return Setup(env, argv)


def _opencode_family(home: Path, base: str, name: str, schema: str) -> dict[str, str]:
    """The mock as the only provider of opencode or a fork of it (the same
    config format; each reads its own ``NAME_*`` switches): their environment."""
    config = {
        "$schema": schema,
        "autoupdate": False,
        "share": "disabled",
        "model": f"mock/{MOCK_MODEL}",
        "provider": {
            "mock": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Mock",
                "options": {"baseURL": f"{base}/v1", "apiKey": MOCK_KEY},
                "models": {MOCK_MODEL: {"name": "Mock model", "tool_call": True}},
            }
        },
    }
    path = _write(home / ".config" / name / f"{name}.json", json.dumps(config, indent=2))
    prefix = name.upper()
    return {
        f"{prefix}_CONFIG": str(path),
        f"{prefix}_DISABLE_MODELS_FETCH": "1",
        f"{prefix}_DISABLE_AUTOUPDATE": "1",
        f"{prefix}_DISABLE_LSP_DOWNLOAD": "1",
        f"{prefix}_DISABLE_SHARE": "1",
        f"{prefix}_DISABLE_DEFAULT_PLUGINS": "1",
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
    }


def _opencode(home: Path, base: str, exe: str) -> Setup:
    env = _opencode_family(home, base, "opencode", "https://opencode.ai/config.json")
    argv = [exe, "run", "--format", "json", "-m", f"mock/{MOCK_MODEL}"]
    return Setup(env, argv)


def _qwen(home: Path, base: str, exe: str) -> Setup:
    # Qwen Code (a Gemini CLI fork) talks to any OpenAI-compatible server;
    # -o stream-json writes Claude Code's stream (the claude dialect).
    settings = {
        "security": {"auth": {"selectedType": "openai"}},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {"enableAutoUpdate": False, "disableAutoUpdate": True, "disableUpdateNag": True},
    }
    _write(home / ".qwen" / "settings.json", json.dumps(settings, indent=2))
    env = {
        "OPENAI_BASE_URL": f"{base}/v1",
        "OPENAI_API_KEY": MOCK_KEY,
        "OPENAI_MODEL": MOCK_MODEL,
        # Its notice that yolo runs without a sandbox, on stderr at each start.
        "QWEN_CODE_SUPPRESS_YOLO_WARNING": "1",
    }
    argv = [exe, "-o", "stream-json", "--approval-mode", "yolo", "-m", MOCK_MODEL]
    return Setup(env, argv)


def _kilo(home: Path, base: str, exe: str) -> Setup:
    # Kilo CLI is an opencode fork: the same config format, KILO_* switches.
    env = _opencode_family(home, base, "kilo", "https://app.kilo.ai/config.json")
    env["KILO_TELEMETRY_LEVEL"] = "off"
    # No background daemon outliving the run.
    env["KILO_NO_DAEMON"] = "1"
    # Kilo has no JSON streaming mode the tier reads: it runs in the ACP cases.
    return Setup(env, [exe, "acp"])


CLIS: dict[str, Cli] = {
    cli.name: cli
    for cli in (
        Cli("pi", "pi", "@mariozechner/pi-coding-agent", "0.73.1", "pi", _pi),
        Cli(
            "claude",
            "claude",
            "@anthropic-ai/claude-code",
            "2.1.197",
            "claude",
            _claude,
            more_versions=("2.1.332",),
        ),
        Cli("codex", "codex", "@openai/codex", "0.169.0", "codex", _codex),
        Cli("gemini", "gemini", "@google/gemini-cli", "0.61.0", "gemini", _gemini),
        Cli("opencode", "opencode", "opencode-ai", "1.18.33", "opencode", _opencode),
        Cli("qwen", "claude", "@qwen-code/qwen-code", "0.24.4", "qwen", _qwen),
        # The platform package itself: @kilocode/cli 7.8.1 has no Linux build.
        Cli(
            "kilo",
            "acp",
            "@kilocode/cli-linux-x64",
            "7.7.9",
            "node_modules/@kilocode/cli-linux-x64/bin/kilo",
            _kilo,
        ),
    )
}


def base_env(home: Path) -> dict[str, str]:
    """The environment every CLI starts from: the test's PATH and locale, an
    isolated HOME, nothing of the machine's own agent configuration."""
    keep = ("PATH", "LANG", "LC_ALL", "TERM", "TMPDIR", "USER", "LOGNAME", "SHELL")
    env = {key: os.environ[key] for key in keep if key in os.environ}
    env.update(COMMON_ENV)
    env["HOME"] = str(home)
    return env
