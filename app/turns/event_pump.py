"""One engine session's events, read in order and handed to a handler.

Both a WebRTC call (:mod:`omnicall.app.call.session`) and a Realtime connection
(:mod:`omnicall.app.realtime.server`) read their engine session's ``events()`` the same way:
each event is first booked (:class:`TurnStages`: when each stage of a turn happened; a
finished assistant turn is reported with its stages to ``on_turn``), then routed to the
owner's handler, which decides what goes on the wire. A ``CameraSeen`` (the one event that
carries an image) is counted here, never kept, and routed like any other: a call sends its
thumbnail to the caller's page only (:func:`omnicall.app.call.messages.event_message`), a Realtime
connection sends nothing of it. The bookkeeping is synchronous (:meth:`EventPump.observe`);
:meth:`EventPump.run` is the thin async loop, run as one named task of its owner.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeGuard

from omnicall.app.tracing import CallTrace
from omnicall.engine.events import CameraSeen, EngineEvent, StageTiming, TurnEvent

MAX_OPEN_TURNS = 16  # turns whose stages are kept; the oldest is pruned beyond this

Route = Callable[[EngineEvent], Awaitable[None]]
#: a finished assistant turn: its stages (name -> when, on the session clock), interrupted
TurnDone = Callable[[dict[str, float], bool], None]


class TurnStages:
    """When each stage of a turn happened (``StageTiming``), per turn id, and when the
    turn's first stage did (its origin, which timing messages count from).

    Bounded: at most ``max_open_turns`` turns are kept; beyond that the oldest is dropped
    (a turn that never ended must not grow the table)."""

    def __init__(self, max_open_turns: int = MAX_OPEN_TURNS) -> None:
        if max_open_turns < 1:
            raise ValueError("max_open_turns must be >= 1")
        self.max_open_turns = max_open_turns
        self._origin_s: dict[int, float] = {}
        self._stages: dict[int, dict[str, float]] = {}

    def __len__(self) -> int:
        return len(self._stages)

    def record(self, event: StageTiming) -> float:
        """Book one stage; returns its turn's origin (the time of the turn's first stage)."""
        origin_s = self._origin_s.setdefault(event.turn_id, event.at_s)
        self._stages.setdefault(event.turn_id, {})[event.stage] = event.at_s
        for kept in (self._origin_s, self._stages):
            while len(kept) > self.max_open_turns:
                kept.pop(next(iter(kept)))
        return origin_s

    def origin_s(self, turn_id: int) -> float | None:
        return self._origin_s.get(turn_id)

    def finish(self, turn_id: int) -> dict[str, float]:
        """The turn ended: its stages, no longer kept (its origin stays until pruned, for a
        late timing of the same turn)."""
        return self._stages.pop(turn_id, {})


def is_assistant_end(event: EngineEvent) -> TypeGuard[TurnEvent]:
    """An assistant reply's turn ended (played out or cut)."""
    return isinstance(event, TurnEvent) and event.role == "assistant" and event.phase == "end"


class EventPump:
    """Books each engine event, then awaits ``route(event)``: the owner's handler.

    ``on_turn`` hears of every finished assistant turn with its stages (metrics and the
    degrade ladder), before the handler sends the turn's end; ``trace`` (``--otel-endpoint``)
    sees every event and writes each finished turn's span."""

    def __init__(self, route: Route, on_turn: TurnDone | None = None,
                 max_open_turns: int = MAX_OPEN_TURNS, trace: CallTrace | None = None) -> None:
        self.route = route
        self.on_turn = on_turn
        self.trace = trace
        self.stages = TurnStages(max_open_turns)
        self.events_in = 0
        self.frames_seen = 0  # camera frames that went to the model (counted, never kept)

    def observe(self, event: EngineEvent) -> None:
        """The synchronous bookkeeping of one event (no I/O)."""
        self.events_in += 1
        if self.trace is not None:
            self.trace.observe(event)
        if isinstance(event, StageTiming):
            self.stages.record(event)
        elif is_assistant_end(event):
            stages = self.stages.finish(event.turn_id)
            if self.on_turn is not None:
                self.on_turn(stages, event.interrupted)
            if self.trace is not None:
                self.trace.turn_ended(event, stages)
        elif isinstance(event, CameraSeen):
            self.frames_seen += 1

    async def run(self, events: AsyncIterator[EngineEvent]) -> None:
        """Until the session's events end (it closed) or the owner cancels this task."""
        async for event in events:
            self.observe(event)
            await self.route(event)
