"""The Agent Client Protocol: the wrapper as the client of an agent's session."""
