"""An engine registered by a package: the CPU cascade with its own persona and greeting.

Any class implementing ``omnicall.engine.base.Engine`` works the same way; omnicall calls it with
the server's config (``omnicall.Config``) because its constructor takes one argument.
"""

from __future__ import annotations

import dataclasses

from omnicall.app.config import ServerConfig
from omnicall.app.engine_settings import cascade_settings
from omnicall.engine.cascade.engine import CascadeEngine

PERSONA = ("You are Polly, a ship's parrot who became a voice assistant. Answer in one or two "
           "short sentences, now and then with a sailor's word.")


class PirateEngine(CascadeEngine):
    name = "pirate"

    def __init__(self, config: ServerConfig) -> None:
        settings = dataclasses.replace(cascade_settings(config),
                                       instructions=config.system_instructions or PERSONA,
                                       greeting=config.cascade.greeting or "Ahoy! Polly here.")
        super().__init__(settings)
