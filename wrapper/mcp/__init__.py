"""The protocol server over runs (``agent-wrapper mcp``).

Most of it is ours and tested without any MCP library: ``registry`` (the
runs one server owns in one nursery: the refusals before a start, the stop
signals, orphan reaping, the guardian, closing), ``tools`` (each tool's
semantics as a plain async method returning a JSON-ready, bounded dict, or
raising ``ToolError`` with a sentence a model can act on) and ``presets``
(the agents a parent may start by name). ``catalog`` is each tool as a client
lists it (schemas, descriptions, the call), still without the SDK;
``server`` is the one module that imports the MCP SDK (the ``mcp`` extra)
and serves the catalog on stdin and stdout.
"""
