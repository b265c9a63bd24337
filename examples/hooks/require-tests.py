#!/usr/bin/env python3
"""A Stop hook that will not let an agent stop before it has run any command.

It speaks the Claude Code hook protocol, so it works under agent-wrapper with
any agent, and in Claude Code itself. Input: the hook event as JSON on stdin.
Output: nothing (the stop is allowed) or a block with the next prompt.
"""

import json
import sys

event = json.load(sys.stdin)
if event.get("stop_hook_active"):
    sys.exit(0)  # already sent back once; the steer limit guards the rest
tools = event.get("tools_used")
if tools is None or "bash" in tools or "Bash" in tools:
    sys.exit(0)
REASON = "You have not run the tests. Run them, fix what fails, and report the result."
print(json.dumps({"decision": "block", "reason": REASON}))
