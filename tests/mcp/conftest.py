"""The demo server over Streamable HTTP, one per session for the tests that only call it
(each SDK server process spends about a second importing the SDK); a test that kills its
server starts its own (``tests.mcp.http_server.http_server``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.mcp.http_server import http_server


@pytest.fixture(scope="session")
def http_base() -> Iterator[str]:
    """The shared server's base URL: its tools at ``/mcp``, and at ``/locked/mcp`` for
    requests with ``X-Demo-Token: secret``. Tests must not kill it (``crash``)."""
    with http_server() as (base, _):
        yield base


@pytest.fixture
def http_url(http_base: str) -> str:
    return f"{http_base}/mcp"
