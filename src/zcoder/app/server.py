"""The model server as the app asks it: which models it serves, whether the current one
answers, and what a name typed after ``/model`` means there.

Shared by the UI's backend (``/model``) and the worker's turn runner (the start-up check
and the model-down probe). What differs between server kinds, and every fix it names, comes
from the client's kind (``agent/servers.py``), so a llama.cpp or LM Studio user is never told
to run ``ollama pull``.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
import trio

from zcoder.agent.model import ModelClient
from zcoder.agent.rounds import describe_model_error
from zcoder.config import Config
from zcoder.errors import CommandError, ModelError, ZcoderError
from zcoder.text.flat import one_line

__all__ = ["Check", "ModelServer"]

_CHECK_SECONDS = 5.0


@attrs.frozen
class Check:
    """What a server check found: ``problem`` (``""``: the model answers), or ``sole``, the
    one model the server serves, to use instead of the one asked for."""

    problem: str = ""
    sole: str = ""


class ModelServer:
    """One model client, for the model ``model()`` names now."""

    def __init__(self, config: Config, client: ModelClient, model: Callable[[], str]) -> None:
        self._host = config.host
        self._client = client
        self._model = model
        self.models: list[str] = []  # the last listing (what Tab offers after /model)

    def describe(self, exc: ModelError) -> str:
        return describe_model_error(exc, self._client.kind, self._host, self._model())

    async def list_models(self) -> list[str]:
        try:
            with trio.fail_after(_CHECK_SECONDS):
                models = [m.name for m in await self._client.list_models()]
        except trio.TooSlowError:
            raise CommandError(
                f"{self._client.kind.name} at {self._host} did not answer in time"
            ) from None
        except ModelError as exc:
            raise CommandError(self.describe(exc)) from None
        self.models = sorted(models)
        return self.models

    async def check(self) -> Check:
        """Whether the server answers and serves the model: the problem (one line, with its
        fix), or the one model an OpenAI-compatible server serves when it is not the one
        asked for (use it: such a server serves what it was started with)."""
        try:
            models = await self.list_models()
        except ZcoderError as exc:
            return Check(str(exc))
        kind = self._client.kind
        if kind.serves_any_name or _served(self._model(), models) is not None:
            return Check()
        if not kind.loads_by_name and len(models) == 1:
            return Check(sole=models[0])
        return Check(self._missing(self._model(), at=True))

    def served_name(self, name: str, models: list[str]) -> str:
        """The name of ``models`` that ``name`` means (``llama3`` is ``llama3:latest``), or
        ``CommandError`` saying how to get it onto this kind of server."""
        served = _served(name, models)
        if served is None:
            raise CommandError(self._missing(one_line(name), at=False))
        return served

    def _missing(self, name: str, *, at: bool) -> str:
        kind = self._client.kind
        where = f"{kind.name} at {self._host}" if at else kind.name
        return f"model {name!r} is not served by {where}: {kind.missing_model_fix(name)}"


def _served(name: str, models: list[str]) -> str | None:
    if name in models:
        return name
    if ":" not in name and f"{name}:latest" in models:
        return f"{name}:latest"  # Ollama's own reading of a bare name
    return None
