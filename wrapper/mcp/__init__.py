"""The protocol server over runs (``agent-wrapper mcp``), without its protocol.

What is here is ours and tested without any MCP library: ``registry`` (the
runs one server owns in one nursery: the refusals before a start, the stop
signals, orphan reaping, the guardian, closing), ``tools`` (each tool's
semantics as a plain async method returning a JSON-ready, bounded dict, or
raising ``ToolError`` with a sentence a model can act on) and ``presets``
(the agents a parent may start by name). The SDK's glue (tool schemas, the
stdio transport, progress notifications) and the subcommand are to come,
in a module of their own that alone imports the SDK.
"""
