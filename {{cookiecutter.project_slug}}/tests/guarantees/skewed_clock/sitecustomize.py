"""Moves this process's wall clock by GUARANTEES_CLOCK_OFFSET_SECONDS.

Python imports `sitecustomize` at start-up from the path, so a service process started with
this directory on PYTHONPATH sees `time.time()`, `time.time_ns()` and `datetime.now()`,
`utcnow()` and `today()` that far off, while the monotonic clock (asyncio's timers) runs
true. libfaketime would move librdkafka's clock as well, but it hangs librdkafka's timed
waits, so the skew is applied where the service's own code reads the time.
"""

from __future__ import annotations

import datetime as _datetime
import os
import time
from typing import Any

OFFSET = float(os.environ.get("GUARANTEES_CLOCK_OFFSET_SECONDS") or 0)
_real_datetime = _datetime.datetime


class _SkewedMeta(type):
    def __instancecheck__(cls, instance: object) -> bool:
        # Datetimes made by C code (drivers) are real ones: they count as instances too.
        return isinstance(instance, _real_datetime)


class SkewedDatetime(_real_datetime, metaclass=_SkewedMeta):
    @classmethod
    def now(cls, tz: _datetime.tzinfo | None = None) -> Any:
        return _real_datetime.now(tz) + _datetime.timedelta(seconds=OFFSET)

    @classmethod
    def utcnow(cls) -> Any:
        return _real_datetime.now(_datetime.UTC).replace(tzinfo=None) + _datetime.timedelta(
            seconds=OFFSET
        )

    @classmethod
    def today(cls) -> Any:
        return cls.now()


if OFFSET:
    _time, _time_ns = time.time, time.time_ns
    setattr(time, "time", lambda: _time() + OFFSET)  # noqa: B010
    setattr(time, "time_ns", lambda: _time_ns() + int(OFFSET * 1_000_000_000))  # noqa: B010
    setattr(_datetime, "datetime", SkewedDatetime)  # noqa: B010
