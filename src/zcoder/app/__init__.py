"""The interactive app: the root nursery and the wiring of the UI to the agent.

The only package that knows both ``ui/`` and ``agent/`` (floor 5): ``main`` runs Trio as a
guest of the asyncio loop that hosts prompt_toolkit; ``backend`` answers the UI's
controller with the agent, the session store and the model client.
"""

from __future__ import annotations

from zcoder.app.main import run_app

__all__ = ["run_app"]
