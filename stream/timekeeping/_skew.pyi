"""`ClockOffsets.shift_held` in one native call (`_skew.c`; `skew.py` is its reference)."""

from runwatch.stream.timekeeping.skew import _Host

class Shifter:
    def __init__(self, gap: float, window: float, outlier: float) -> None: ...
    def __call__(
        self, host: _Host, run: str | None, ts: float, arrival: float, deadband: float, /
    ) -> float: ...
