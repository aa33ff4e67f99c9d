"""What trainers, rollout workers and inference servers import: event models and emitters.

Kept light on purpose: importing this package pulls pydantic and nothing heavier.
"""

from runwatch.emitters.emitter import Emitter
from runwatch.emitters.events import KNOWN_KINDS, MAX_EVENT_BYTES, Event, Source, validate

__all__ = ["KNOWN_KINDS", "MAX_EVENT_BYTES", "Emitter", "Event", "Source", "validate"]
