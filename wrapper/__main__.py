from wrapper.cli import entry

entry()
