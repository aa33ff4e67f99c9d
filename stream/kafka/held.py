"""How long a worker's event loop is held at a stretch: the figure that says how short its
session timeout may be.

Everything a worker does runs on one asyncio loop: the consuming loop, takeovers, the
checkpoints' bookkeeping, /metrics, and aiokafka's group heartbeat. While a callback runs
without yielding -- or the process waits for a core on a loaded machine -- no heartbeat goes
out; held longer than the session timeout less the heartbeat interval, the group takes a
live worker's partitions away (a false rebalance, then a takeover of every partition it
held). A task that sleeps `every` seconds and notes how late it wakes sees each such hold,
to within `every`; the longest is on /metrics (`runwatch_event_loop_held_max_seconds`).
"""

from __future__ import annotations

import asyncio

#: How often the watch wakes: ten wake-ups a second cost nothing measurable.
EVERY_S = 0.1


class LoopHolds:
    """The longest the running loop was held since `watch` began (seconds)."""

    def __init__(self, every: float = EVERY_S) -> None:
        self.every = every
        self.longest = 0.0

    def noted(self, late: float) -> None:
        """A wake-up `late` seconds after it was due."""
        if late > self.longest:
            self.longest = late

    async def watch(self) -> None:
        """Until cancelled: sleep `every`, note how late the loop woke it."""
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + self.every
            await asyncio.sleep(self.every)
            self.noted(loop.time() - due)
