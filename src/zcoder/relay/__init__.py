"""The same-host inter-agent relay (see docs/relay-protocol.rst)."""
