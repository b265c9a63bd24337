"""Claude-Code-compatible hooks: the protocol, the handler runners, steering."""
