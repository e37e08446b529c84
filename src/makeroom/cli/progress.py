"""A progress bar over simulated time that shows itself only when a run takes more than a moment."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from makeroom.cli.common import err_console

SHOW_AFTER_S = 0.3


class SimProgress:
    def __init__(self) -> None:
        self._bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[sim]}"),
            TimeElapsedColumn(),
            console=err_console,
            transient=True,
        )
        self._started = time.perf_counter()
        # a bar only where a person watches, and none under NO_COLOR (its cursor codes are styling)
        self._wanted = err_console.is_terminal and not err_console.no_color
        self._shown = False
        self._task: TaskID | None = None

    def track(self, label: str, horizon: float, unit: str = "min") -> Callable[[float], None]:
        """A callback taking simulated time, for one run of ``horizon`` simulated seconds (``unit``
        "min"); or any other progress, shown as is in ``unit`` (``bench fgd``: % arrived)."""
        if self._task is not None:
            self._bar.remove_task(self._task)
        task = self._bar.add_task(label, total=horizon, sim="")
        self._task = task
        last = [0.0]

        def update(t: float) -> None:
            if t - last[0] < horizon / 200 and t < horizon:
                return
            last[0] = t
            if not self._shown and self._wanted and time.perf_counter() - self._started > SHOW_AFTER_S:
                self._bar.start()
                self._shown = True
            shown = (
                f"{t / 60:.1f}/{horizon / 60:.0f} min" if unit == "min" else f"{t:.0f}/{horizon:.0f}{unit}"
            )
            self._bar.update(task, completed=t, sim=shown)

        return update

    def close(self) -> None:
        if self._shown:
            self._bar.stop()


@contextmanager
def sim_progress() -> Iterator[SimProgress]:
    bar = SimProgress()
    try:
        yield bar
    finally:
        bar.close()
