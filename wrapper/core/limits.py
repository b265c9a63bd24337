"""The wrapper's own timing defaults and limits, in one place.

Every pause, poll, bound and buffer size the wrapper sets for itself is
named here, with why it is that number; the modules that use one import it.
What a user sets (the run options' defaults) is ``wrapper.core.config``;
what an agent needs (its grace periods, its flags) its dialect declares.
Standard library only: the guardian's cleanup reads these too.
"""

from __future__ import annotations

# -- The agent's process and its leftovers ------------------------------------

#: How long a child that was sent SIGKILL may take to be reaped before the
#: wrapper gives up waiting (it is then reported, never waited on forever).
REAP_TIMEOUT = 5.0
#: How often leftovers are checked while they are being terminated after the
#: agent itself exited.
LEFTOVER_POLL = 0.05
#: The pipe buffer asked for the agent's stdout (Linux allows unprivileged
#: processes up to /proc/sys/fs/pipe-max-size, 1 MiB by default).
PIPE_BUFFER_BYTES = 1024 * 1024
#: Rounds of leftover cleanup (SIGTERM, then SIGKILL) before giving up on
#: processes that keep appearing.
CLEANUP_ROUNDS = 4
#: Work in the agent's process tree that counts as activity when the idle
#: deadline comes due: CPU time spent over the silence, as a share of one
#: core (an idle Node process with its timers stays well below it), or any
#: new process.
IDLE_CPU_SHARE = 0.05
#: While output flows, the tree is looked at (for the idle check to compare
#: with) at most once per this share of --idle-timeout.
IDLE_BASELINE_SHARE = 0.25
#: Seconds of total silence from an agent whose dialect is being guessed
#: before the run says it may be an ACP agent waiting for a client: agents
#: in a JSON streaming mode write their first line within a second or two.
SILENT_AGENT_HINT_AFTER = 5.0
#: How much of a late final message's text its warning quotes.
LATE_TEXT_CHARS = 200

#: An agent that died of a stop signal the wrapper did not send was most
#: likely signalled with the wrapper, as a whole job or process group is
#: (Slurm's scancel signals every process of the job, the agents first): the
#: wrapper waits this long for its own stop signal before deciding the
#: outcome, so that such a run ends ``aborted``, not ``error``. Signals to
#: the processes of one job come within milliseconds of each other.
OWN_STOP_WAIT = 0.5

#: A live session's agent being ended (an abort, a signal, --timeout) is
#: first sent its own cancel (ACP's ``session/cancel``, pi's ``abort``, ...);
#: the SIGTERM waits for the turn to end, at most this long. Sent in the same
#: instant, the signal cut the agent's answer to the cancel short (the answer
#: then came after its exit, or never). Measured mid shell tool on a loaded
#: 2-core machine, from ``session/cancel`` to the turn's answer: Qwen Code
#: 0.24.4 0.02 s, opencode 0.10 s, Kilo CLI 0.15 s, Gemini CLI 0.21 s; an
#: agent that does not answer costs an abort this second, no more.
CANCEL_BEFORE_TERM = 1.0

#: How often a child is polled for its exit where there are no pidfds.
EXIT_POLL = 0.02

#: How many times a tree being frozen is listed again for processes that
#: appeared meanwhile, before giving up on catching all of them. Each look
#: at the wrapper's direct children costs microseconds, a full listing a few
#: milliseconds; a process that forks faster than that is still caught as a
#: new child of the subreaper on one of the quick looks.
FREEZE_ROUNDS = 200
#: Quick looks at the wrapper's direct children per full listing while freezing.
FREEZE_QUICK_LOOKS = 20


# -- A run whose wrapper died: the guardian's sweeps --------------------------

#: SIGTERM to SIGKILL once the wrapper is gone: time for the agent to save
#: its state, short enough that the run ends soon after its wrapper.
TERM_SECONDS = 1.0
#: After a SIGKILL, how long the processes get to leave the process table.
KILL_WAIT_SECONDS = 0.2
#: Pause between two sweeps that found nothing.
SWEEP_PAUSE_SECONDS = 0.1
#: The sweeps end once they have found nothing for this long: a process the
#: wrapper forked just before it died may still be on its way to exec the
#: agent (and to carry the run id); on a loaded machine that takes a moment.
QUIET_SECONDS = 0.5
#: At most this many sweeps send signals: the bound on the cleanup when
#: processes keep appearing (a fork bomb) or cannot die (state D).
MAX_SIGNAL_SWEEPS = 10


# -- Hooks, observers and escalations -----------------------------------------

#: Output kept from a handler, per stream; the rest is read and dropped.
HANDLER_OUTPUT_BYTES = 1024 * 1024
#: How much of the PreToolUse relay's answer pi's extension and opencode's
#: plugin read: one handler's answer (at most ``HANDLER_OUTPUT_BYTES``), a
#: rewritten input of another's (as much again) and the relay's own keys.
#: An answer past it fails the read, and with it the gate, open: this is
#: far above what the relay can print.
RELAY_ANSWER_MAX_BYTES = 4 * HANDLER_OUTPUT_BYTES
#: After a handler exits, how long a process it left behind may hold its pipes.
HANDLER_DRAIN_TIMEOUT = 1.0
#: An ``mcp_tool`` handler's stdio server, once its call is done and its
#: stdin closed, has this long to exit before its group is killed; then as
#: long again to be reaped. The protocol asks a server to exit at the end
#: of its input; one that has not within a second is not going to.
MCP_SERVER_EXIT_GRACE = 1.0
#: The longest line kept from an ``mcp_tool`` handler's stdio server: an
#: answer is a hook decision of a few kilobytes, and a handler's output is
#: capped at ``HANDLER_OUTPUT_BYTES`` anyway; anything longer ends the call.
MCP_HANDLER_LINE_MAX_BYTES = 4 * 1024 * 1024
#: The most of one HTTP response read from an ``mcp_tool`` handler's http
#: server (a JSON answer, or an event stream, whole): as for a stdio server's
#: line, no answer is that long, and one that never ends would otherwise be
#: held in the wrapper's memory until the handler's timeout.
MCP_HANDLER_RESPONSE_MAX_BYTES = MCP_HANDLER_LINE_MAX_BYTES
#: A verifier agent gets this long beyond its own limit to write its result.
VERIFIER_MARGIN = 10.0
#: An http handler's response is read up to this size; a larger one is a
#: failure (cutting a JSON answer would change what it says).
HTTP_RESPONSE_BYTES = 1024 * 1024
#: The SessionEnd handlers of a run, all together, get at most this long:
#: whoever waits on the wrapper's exit (a runner, a person after Ctrl-C)
#: must not wait on a notifier for long.
SESSION_END_TIMEOUT = 5.0

#: Observer handlers running at once.
OBSERVER_CONCURRENCY = 4
#: Observer jobs waiting to run; beyond this new ones are dropped (and counted).
OBSERVER_QUEUE = 256

#: Time limits of the notifier command and of ``notify-send``.
NOTIFY_TIMEOUT = 30.0
DESKTOP_TIMEOUT = 5.0
#: How often the run directory is checked for a reply.
REPLY_POLL = 0.25
#: How long ``reply`` waits for the run to say whether it took the answer:
#: the run's UserPromptSubmit handlers check a reply that becomes a prompt,
#: and each may take its own timeout (60 s by default), a few in a chain.
REPLY_VERDICT_TIMEOUT = 300.0
#: A reply's nonce names a file in the run directory: letters and digits,
#: this long at most (``reply`` makes 32).
REPLY_NONCE_MAX_CHARS = 64

#: PreToolUse handler chains run at once for an ACP agent's permission
#: requests (as many as observer handlers): an agent may ask about dozens
#: of tools in one go, and each chain starts processes; the rest wait their
#: turn, in the order they were asked.
PERMISSION_HOOK_CONCURRENCY = 4
#: Permission requests of an ACP agent waiting for a decision at once (their
#: handlers running or waiting their turn, a person asked). An agent asks
#: about one tool at a time, a few when it runs tools in parallel; past
#: this many waiting it floods, and each request waiting holds a task and
#: its tool's record: the requests past it are denied at once (a warning).
MAX_WAITING_PERMISSIONS = 64
#: Tools of one ACP prompt turn the wrapper keeps a record of (to start and
#: end each once, and list the turn's calls). Long turns of real agents run
#: hundreds; the tools past this many in one turn are not reported (a warning).
MAX_TOOLS_PER_TURN = 10_000


# -- Steers from outside -------------------------------------------------------

#: At the end of a live session's turn, how long the agent's answers to the
#: steers just written on its input are waited for before the wrapper
#: decides what comes next (a refused steer is the next prompt). pi and
#: Codex's app-server answer within milliseconds (0.4 ms and 1-2 ms in the
#: captures of pi 0.73.1 and Codex 0.169.0, tests/data/real/twoway); two
#: seconds covers a loaded machine without holding a run's end noticeably.
LIVE_STEER_ANSWER_TIMEOUT = 2.0
#: How much of a next prompt that never reached a live agent (it exited while
#: the stop hooks ran) the run's error quotes: enough to recognise it.
LOST_PROMPT_CHARS = 200

# -- What the wrapper writes --------------------------------------------------

#: How much unwritten output may pile up before the stream waits for the reader.
OUTPUT_BACKLOG_BYTES = 8 * 1024 * 1024
#: The write buffer of each log a run appends to (stdout.log, stderr.log,
#: events.jsonl). A write at least this big (a large read of the agent's
#: output) goes straight to the file, so a bigger buffer saves few system
#: calls; but once written, its pages stay in the run's memory until the run
#: ends, idle or not: at 1 MiB the three logs held 2 MB more in a run that
#: had streamed a few megabytes. 64 KiB is 16 writes a megabyte of small
#: events.
STREAM_BUFFER_BYTES = 64 * 1024
#: While a run goes on, what its logs hold in their write buffers reaches
#: the files at once when the agent pauses (its reader finds no more input
#: ready), and at least this often while it writes without a pause, so that
#: whoever follows events.jsonl or stdout.log (``tail -f``) sees each line
#: within a second. Half a second keeps that promise on a loaded machine,
#: where a timer fires late; a flush is one write of what the buffer holds,
#: so two a second per log are lost next to the reads of a busy stream.
#: Never a flush per line: a stream that does not pause is written a buffer
#: (or half a second) at a time.
LOG_FLUSH_INTERVAL = 0.5

#: A tool that ran at least this long gets a line when it ends, with its duration.
TOOL_END_LINE_SECONDS = 1.0
#: On a terminal, a tool running longer than this gets a status line with its
#: elapsed time, redrawn every ``TICK_SECONDS`` (no faster: it is only a clock).
TICK_AFTER_SECONDS = 2.0
TICK_SECONDS = 1.0

#: How long the wrapper waits, at its end, for its spans to reach the
#: collector: a collector that is down must not hold up whoever waits on the
#: wrapper's exit for more than this.
FLUSH_TIMEOUT = 2.0


# -- A batch ------------------------------------------------------------------

#: How often a terminal's progress line is redrawn (elapsed time moving).
PROGRESS_TICK = 1.0
#: What is left below the wrapper at the batch's end gets this long between
#: SIGTERM and SIGKILL.
ORPHAN_KILL_AFTER = 2.0
#: ``--skip-passed`` without ``--runs-dir`` is refused; to name the folder of
#: the spec's latest batch instead, at most this many of the newest batch
#: folders under the default root are read (each a batch.json, possibly
#: megabytes): enough for a day of retries, quick even on a slow disk.
EARLIER_BATCHES_READ = 50


# -- Steers from outside ------------------------------------------------------

#: The most a steer's text may hold, in UTF-8 bytes, whatever the run: what
#: a live session takes on its stdin as one message (an instruction, not a
#: document: a larger one belongs in a file the agent reads). A run whose
#: agent takes its prompt on its command line takes less.
STEER_MAX_BYTES = 1024 * 1024
#: The most one command-line argument may hold on Linux (MAX_ARG_STRLEN: 32
#: pages, the terminating NUL included). An agent resumed with a steer takes
#: the whole prompt as one argument. Pages are 4 KiB at the least, so this
#: holds on every Linux; elsewhere only the whole command line bounds it.
ARGUMENT_MAX_BYTES = 32 * 4096
#: The whole command line (arguments and environment) where the system does
#: not say (``sysconf(SC_ARG_MAX)``): 256 KiB is the smallest of current
#: Linux (a quarter of an 8 MiB stack is 2 MiB) and macOS (1 MiB).
ARG_MAX_FALLBACK = 256 * 1024
#: What a steer's prompt may gain after it was accepted: hook context
#: (SessionStart, UserPromptSubmit ``additionalContext``) and the line that
#: says which tool call it interrupted. They are cut to fit, so that a steer
#: accepted for its size is never too long once interrupted for; 16 KiB is
#: a few pages of context, an eighth of what one argument holds.
STEER_PROMPT_RESERVE_BYTES = 16 * 1024
#: Left free on the command line beyond what is measured: the attempt number
#: growing a digit, a session id longer than the one measured, a leading
#: space before a prompt that starts with ``-``.
COMMAND_LINE_SLACK_BYTES = 4096
#: Refused steers result.json lists; the rest are counted
#: (``externalSteersOmitted``). A sender that is refused at the limit of
#: steers may keep trying: the list must not grow with it.
LISTED_REFUSED_STEERS = 20

# -- A protocol server over runs (the MCP registry) ----------------------------

#: Runs one server supervises at once, unless told otherwise: each is an
#: agent CLI of a few hundred MB of memory and its own API spend, and a
#: parent model that loops on ``start`` must be stopped by a number it is
#: told, not by the machine running out.
MCP_DEFAULT_MAX_RUNS = 8
#: The most characters one tool answer may hold: clients put an answer into
#: the parent model's context whole, and the common clients cut or refuse
#: tool output past about 25,000 characters (a model's page, not a file).
MCP_ANSWER_MAX_CHARS = 25_000
#: A run's final text in ``result`` when the caller says nothing: under the
#: answer's bound, with room for the other fields of the answer.
MCP_RESULT_DEFAULT_CHARS = 20_000
#: The longest ``result`` may be asked to return of a final text: the
#: answer's bound (the whole text is always in the file beside result.json).
MCP_RESULT_MAX_CHARS = MCP_ANSWER_MAX_CHARS
#: How long ``wait`` waits when the caller says nothing: well under the
#: tool-call timeouts of the clients that do not reset them on progress
#: (Claude Code, Codex and Gemini CLI: each held a 30 s call with its
#: defaults), so a plain call comes back before it is cut.
MCP_WAIT_DEFAULT = 30.0
#: The longest one ``wait`` may be asked for: a client that resets its
#: timeout on progress keeps the call open, and five minutes still lets the
#: parent look at what its subagents did, and steer them, between waits.
MCP_WAIT_MAX = 300.0
#: How often a ``wait`` reports progress while it waits: well inside the
#: 10 s the clients that reset their tool timeout on progress expect.
MCP_WAIT_PROGRESS_EVERY = 5.0
#: Events one ``events`` call returns at most: enough to follow a run a page
#: at a time, few enough to stay inside the answer's bound.
MCP_EVENTS_MAX = 200
#: Runs ``list`` names when the caller says nothing.
MCP_LIST_DEFAULT = 50
#: The most ``list`` names in one answer (a run's entry is ~300 characters:
#: this stays inside the answer's bound).
MCP_LIST_MAX = 60
#: How long ``steer`` waits for its receipt: the ``steer`` command's wait.
MCP_STEER_WAIT = 30.0
#: How long ``abort`` waits for the run to end: the ``abort`` command's wait
#: (a run ends within its kill bounds, 10 s by default, well inside it).
MCP_ABORT_WAIT = 30.0
#: How long a steer sent right after ``start`` waits for the run's first
#: attempt to be under way before it is taken as the run's control takes
#: one between attempts (spawning an agent takes well under a second).
MCP_STEER_READY_WAIT = 5.0
#: The longest message the MCP server reads from its client: a steer's
#: text at its most (``STEER_MAX_BYTES``) with every byte escaped in JSON
#: (six characters for a control byte), and room for the request around it.
MCP_REQUEST_MAX_BYTES = 6 * STEER_MAX_BYTES + 64 * 1024
#: How long ``start`` waits for the agent to be spawned before it answers:
#: an agent that cannot be started is then a tool error, not a run found
#: failed later, and spawning takes milliseconds, well inside the half
#: second a ``start`` may take.
MCP_START_SETTLE = 0.3
#: How often ``start`` looks whether the agent is spawned meanwhile.
MCP_START_POLL = 0.01
#: How much of a text field (an error's message, a question, an event's
#: text) one answer quotes: a paragraph a model can act on; the rest is in
#: the run's files.
MCP_QUOTE_CHARS = 2000
#: How much of a run's final text ``wait`` shows of each run that ended:
#: enough to decide whether to ask for the ``result``.
MCP_PREVIEW_CHARS = 500
#: When the registry closes, how long it waits for its runs to end after
#: aborting them before it cancels them (a cancelled run still ends its
#: agent's tree and writes result.json): beyond every run's kill bounds
#: (grace + kill-after, 10 s by default), so an ordinary run ends on its own.
MCP_CLOSE_WAIT = 30.0

# --- watching runs from outside (``ps``, ``watch``) ------------------------------

#: How often ``watch`` of one run looks at its events.jsonl and result.json
#: (a stat each, reading only what was added): a quarter second reads as
#: live to a person, and four stats a second cost the machine nothing.
WATCH_POLL_SECONDS = 0.25
#: How often the table of ``watch RUNS_DIR`` looks at its runs, and redraws
#: at most: its clock counts seconds, and two stats a run a second keep 200
#: runs far under a hundredth of a core.
WATCH_TABLE_SECONDS = 1.0
#: Once result.json is there, how long ``watch`` waits for the run's last
#: events to reach events.jsonl (written within a second of the agent's
#: line) before it prints the result line from result.json itself.
WATCH_RESULT_DRAIN_SECONDS = 2.0
#: What ``watch`` reads of events.jsonl at once, and the longest line it
#: keeps waiting for: an event line is a few kilobytes (an assistant message
#: with its text); one longer than this is not an event the view can show.
WATCH_READ_BYTES = 1024 * 1024
WATCH_LINE_MAX_BYTES = 64 * 1024 * 1024
# -- Cost -------------------------------------------------------------------------

#: How long the price table's lookup (``agent-wrapper prices``, a process of
#: its own) may take before the run goes on with the price unknown: it loads
#: the table and prices once in about 0.4 s on an idle machine (measured with
#: genai-prices 0.2.3); ten times that leaves room for a loaded one, and a run
#: that ends waits at most this long for its cost.
PRICE_LOOKUP_TIMEOUT = 5.0
#: The largest price cache file read: a record is a few hundred bytes.
PRICE_FILE_MAX_BYTES = 64 * 1024

#: The share of a spending cap (``--max-cost``, ``--max-tokens``) at which
#: ``Notification`` handlers are told, once per cap: late enough that most
#: runs never see it, early enough that a person can raise the cap (or
#: prepare to answer a ``--on-budget escalate`` question) before the run
#: stops.
CAP_NOTICE_SHARE = 0.8
