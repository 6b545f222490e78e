"""Hardware counters on a real board (``orch bench --metric cycles``), decided before they run:
``perf stat``'s command around the counting agent and how its CSV output is read. Pure.

The board's PMU counts what its own CPU retires and spends: ``instructions:u`` and ``cycles:u``
(user space only, which perf_event_paranoid 2 allows without root). Each round runs BASE and
BASE + k inferences in two processes, so that start-up, imports and the model's loading cancel in
the difference (not in forked children, as the emulated count does: perf stat adds a child's count
to its parent's). Cycles, unlike instructions, see memory stalls, caches
and the clock: they vary from run to run more than instruction counts do, and the verdict's noise
term (the spread between rounds) says by how much on this board.
"""

from __future__ import annotations

from dataclasses import dataclass

INSTRUCTIONS, CYCLES = "instructions:u", "cycles:u"
EVENTS = (INSTRUCTIONS, CYCLES)
# perf's CSV field separator (-x): one line per event, "value,unit,event,run time,percent,...".
SEPARATOR = ","
# What perf prints in the value field of an event it could not read.
_UNREAD = ("<not counted>", "<not supported>")


@dataclass(frozen=True, kw_only=True)
class PerfReading:
    """One process's counts, by event (None: perf could not read that event on this board)."""

    values: dict[str, int | None]

    def value(self, event: str) -> int | None:
        return self.values.get(event)


def perf_argv(perf: str, output_file: str, command: list[str]) -> list[str]:
    """``perf stat`` counting EVENTS of ``command`` (and its children), CSV into ``output_file``."""
    return [
        perf,
        "stat",
        "-x",
        SEPARATOR,
        "--no-big-num",
        "-e",
        ",".join(EVENTS),
        "-o",
        output_file,
        "--",
        *command,
    ]


def parse_perf_csv(text: str) -> PerfReading:
    """perf stat's ``-x ,`` output: ``#`` lines and blank ones are perf's own comments."""
    values: dict[str, int | None] = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split(SEPARATOR)
        if len(fields) < 3:
            continue
        raw, event = fields[0].strip(), fields[2].strip()
        if event not in EVENTS:
            continue
        if raw in _UNREAD:
            values[event] = None
            continue
        try:
            values[event] = int(float(raw))
        except ValueError:
            values[event] = None
    return PerfReading(values=values)


def unread_events(reading: PerfReading) -> list[str]:
    """The events perf did not read (absent or <not counted>/<not supported>)."""
    return [event for event in EVENTS if reading.value(event) is None]
