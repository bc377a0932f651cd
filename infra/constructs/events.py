"""The custom event bus Tornasole publishes its SageMaker-shaped events on (``docs/EVENTS.md``)."""

from __future__ import annotations

from aws_cdk import aws_events as events
from constructs import Construct

__all__ = ["EventBus"]


class EventBus(Construct):
    """A custom bus (``bus.event_bus``) and the source Tornasole's events carry."""

    def __init__(self, scope: Construct, id_: str, *, bus_name: str, source: str) -> None:
        super().__init__(scope, id_)
        self.source = source
        self.event_bus = events.EventBus(
            self,
            "Bus",
            event_bus_name=bus_name,
            description=f"Tornasole rule and training job events ({source})",
        )
