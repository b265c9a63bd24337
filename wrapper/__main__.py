from wrapper.guardian import entry

entry()
