"""The agents a parent may start by name (``start`` with ``agent``): each
one's command line in the JSON mode the wrapper reads, its live mode where
it has one (a steer then joins the running turn instead of restarting the
agent), and what it may do unasked, said in a sentence for the model that
picks it: nobody answers an agent's approval prompts under the server.

Only flags the project's dialects and conformance tier use are written
here; where a posture was not checked against the real CLI, its text says
so rather than guess.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class Preset:
    """One agent, as ``start`` runs it."""

    name: str
    #: The agent in the JSON streaming mode its dialect reads.
    command: tuple[str, ...]
    #: The agent driven live on its stdin (two-way), or None.
    live: tuple[str, ...] | None
    #: What the agent may do without asking, and what sandbox holds it.
    posture: str

    def describe(self) -> dict[str, object]:
        return {
            "agent": self.name,
            "command": list(self.command),
            "live_command": None if self.live is None else list(self.live),
            "posture": self.posture,
        }


#: What an ACP agent's posture is under the wrapper: it is the agent's client
#: and answers each permission request the agent sends itself.
_ACP_POSTURE = (
    "the wrapper is its ACP client and answers each permission request: allowed "
    "unless the run's settings (PreToolUse handlers, 'permissions') deny it"
)

PRESETS: dict[str, Preset] = {
    preset.name: preset
    for preset in (
        Preset(
            name="pi",
            command=("pi", "--mode", "json", "-p"),
            live=("pi", "--mode", "rpc"),
            posture=(
                "pi has no permission prompts and no sandbox: it reads, edits and runs "
                "shell commands in its working directory unasked"
            ),
        ),
        Preset(
            name="claude",
            # acceptEdits: edits go ahead; a tool that would ask (a shell
            # command) is denied in print mode, since nobody answers.
            command=(
                "claude",
                "-p",
                "--output-format",
                "stream-json",
                "--verbose",
                "--permission-mode",
                "acceptEdits",
            ),
            live=(
                "claude",
                "-p",
                "--input-format",
                "stream-json",
                "--output-format",
                "stream-json",
                "--verbose",
                "--permission-mode",
                "acceptEdits",
            ),
            posture=(
                "Claude Code in permission mode acceptEdits: it reads and edits files in its "
                "working directory unasked; a tool that would ask (most shell commands) is "
                "denied, since nobody answers its prompts; no sandbox beyond that"
            ),
        ),
        Preset(
            name="codex",
            command=("codex", "exec", "--json", "-c", 'sandbox_mode="workspace-write"'),
            live=(
                "codex",
                "app-server",
                "-c",
                'approval_policy="never"',
                "-c",
                'sandbox_mode="workspace-write"',
            ),
            posture=(
                "Codex in its workspace-write sandbox: it edits files and runs commands "
                "inside its working directory without asking; writing elsewhere (and, as "
                "Codex configures that sandbox, the network) is refused by the sandbox"
            ),
        ),
        Preset(
            name="gemini",
            # No approval flag: the tier checked only --yolo (everything) for
            # the stream-json mode, which is not a default to hand a model.
            command=("gemini", "--output-format", "stream-json"),
            live=("gemini", "--acp"),
            posture=(
                "Gemini CLI in its default approval mode: tools that would ask (edits, "
                "shell commands) are not run in its non-interactive mode, since nobody "
                "answers (not checked against the real CLI: run it live, or give a "
                "command, for an agent that edits); in live mode, " + _ACP_POSTURE
            ),
        ),
        Preset(
            name="opencode",
            command=("opencode", "run", "--format", "json"),
            live=("opencode", "acp"),
            posture=(
                "opencode's own permission settings decide (by default it edits and runs "
                "commands in its working directory unasked; a rule that asks cannot be "
                "answered in run mode); no sandbox; in live mode, " + _ACP_POSTURE
            ),
        ),
        Preset(
            name="qwen",
            # Qwen Code's stream-json output is Claude Code's stream.
            command=("qwen", "-o", "stream-json", "--approval-mode", "default"),
            live=("qwen", "--acp", "--approval-mode", "default"),
            posture=(
                "Qwen Code in approval mode default: tools that would ask (edits, shell "
                "commands) are not run in its non-interactive mode, since nobody answers "
                "(checked for its live mode only); in live mode, " + _ACP_POSTURE
            ),
        ),
        Preset(
            name="kilo",
            # Kilo CLI has no JSON streaming mode the wrapper reads: ACP only.
            command=("kilo", "acp"),
            live=("kilo", "acp"),
            posture=(
                "Kilo CLI runs live over ACP only; its own permission settings decide "
                "what it asks, and " + _ACP_POSTURE
            ),
        ),
        Preset(
            name="copilot",
            # The registry knows copilot as an ACP agent by --acp; its
            # permission behaviour was not checked against the real CLI.
            command=("copilot", "--acp"),
            live=("copilot", "--acp"),
            posture=(
                "GitHub Copilot CLI over ACP (not checked against the real CLI): " + _ACP_POSTURE
            ),
        ),
    )
}
