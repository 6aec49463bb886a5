"""The server a given host really is: a host without ``/v1`` where an OpenAI-compatible
server answers is used as such (and said); a run that found no server looks again at every
request and says, until one answers, only what was tried."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agent.test_openai_detect import _oneshot, closed_port, port_of
from tests.fakes.ollama_server import FakeOllama
from tests.fakes.openai_server import FakeOpenAI
from zcoder.agent.connect import NoServer, choose_server, make_client
from zcoder.agent.detect import Candidate, api_at
from zcoder.agent.rounds import describe_model_error
from zcoder.agent.servers import KINDS
from zcoder.config import Config, RawOptions, load_config
from zcoder.errors import NoServerFound

OLLAMA, LLAMA, _, _ = KINDS


def config(tmp_path: Path, env: dict[str, str] | None = None, **flags: str) -> Config:
    return load_config(RawOptions(workspace=str(tmp_path), **flags), env or {})  # type: ignore[arg-type]


@pytest.fixture
def llama() -> Iterator[FakeOpenAI]:
    with FakeOpenAI({"models": ["smollm2:135m"]}) as fake:
        yield fake


async def test_api_at_tells_ollama_from_openai_and_from_nothing(llama: FakeOpenAI) -> None:
    with FakeOllama() as ollama:
        assert await api_at(ollama.url) == "ollama"
    assert await api_at(llama.url) == "openai"
    assert await api_at(f"http://127.0.0.1:{closed_port()}") is None


async def test_a_host_without_v1_on_an_openai_server_is_used_as_one(
    tmp_path: Path, llama: FakeOpenAI
) -> None:
    bare = llama.url.removeprefix("http://")
    choice = await choose_server(config(tmp_path, host=bare))
    assert (choice.config.api, choice.config.host) == ("openai", llama.url + "/v1")
    assert choice.line == (f"model server: llama.cpp at {llama.url}/v1 (found at --host {bare})")
    assert choice.config.model == "smollm2:135m"  # the server's own, none was chosen
    from_env = await choose_server(config(tmp_path, {"OLLAMA_HOST": bare}))
    assert from_env.line.endswith(f"(found at OLLAMA_HOST={bare})")


async def test_an_ollama_host_and_a_given_api_stay_as_they_are(
    tmp_path: Path, llama: FakeOpenAI
) -> None:
    with FakeOllama() as ollama:
        choice = await choose_server(config(tmp_path, host=ollama.url))
        assert choice.line == f"model server: Ollama at {ollama.url}"
    told = await choose_server(config(tmp_path, host=llama.url, api="ollama"))
    assert told.config.api == "ollama"  # --api ollama is obeyed, even when wrong
    down = await choose_server(config(tmp_path, host=f"127.0.0.1:{closed_port()}"))
    assert down.config.api == "ollama" and down.config.server_note == ""


async def test_no_server_found_says_what_was_tried_at_every_request(tmp_path: Path) -> None:
    candidates = [Candidate(OLLAMA, closed_port())]
    choice = await choose_server(config(tmp_path), candidates=candidates)
    assert not choice.found and choice.config.server_missing == choice.line
    client = NoServer(choice.config, candidates=candidates)
    with pytest.raises(NoServerFound) as caught:
        await client.list_models()
    assert describe_model_error(caught.value, client.kind, choice.config.host, "m") == choice.line
    assert isinstance(make_client(choice.config), NoServer)
    await client.aclose()


async def test_a_run_that_found_none_takes_the_server_started_later(
    tmp_path: Path, llama: FakeOpenAI
) -> None:
    down = [Candidate(LLAMA, closed_port())]
    choice = await choose_server(config(tmp_path), candidates=down)
    async with NoServer(choice.config, candidates=[Candidate(LLAMA, port_of(llama.url))]) as c:
        assert [m.name for m in await c.list_models()] == ["smollm2:135m"]
        assert c.kind.name == "llama.cpp"


def test_oneshot_on_a_host_without_v1_answers_and_says_where(tmp_path: Path) -> None:
    script = {"models": ["smollm2:135m"], "responses": [{"chunks": [{"content": "Hi there"}]}]}
    with FakeOpenAI(script) as fake:
        bare = fake.url.removeprefix("http://")
        done = _oneshot(["--host", bare, "-p", "hello"], tmp_path)
        url = fake.url
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Hi there"
    assert f"llama.cpp at {url}/v1 (found at --host {bare})" in done.stderr
    assert "not an Ollama server" not in done.stderr
