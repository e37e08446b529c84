"""Benchmark runs on several processes, forked so that the large input every run shares (a whole
trace's demand, already converted) is inherited by each worker instead of pickled for every run."""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, ProcessPoolExecutor
from contextlib import contextmanager
from typing import Any

_worker: dict[str, Any] = {}  # in a worker: what it was forked with


def available_cpus() -> int:
    """The CPUs this process may run on (a container's or taskset's limit, not the machine's)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def call(fn: Callable[[Any, Any], Any], arg: Any) -> Any:
    """In a worker: ``fn(shared, arg)``, ``fn`` a module-level function (pickled by name)."""
    return fn(_worker["shared"], arg)


def _start(shared: object) -> None:
    _worker["shared"] = shared
    # A terminal's Ctrl-C reaches its whole process group: a worker that died of it would break the
    # pool under the parent, which stops the workers itself (``pool``) and says how to go on.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextmanager
def pool(shared: object, jobs: int) -> Iterator[Executor | None]:
    """``jobs`` forked workers that see ``shared`` as it was when each started (fork passes it on
    without pickling); None (run in this process) for one job or where fork is not available."""
    if jobs <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        yield None
        return
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(jobs, mp_context=context, initializer=_start, initargs=(shared,)) as executor:
        try:
            yield executor
        except BaseException:
            # Ctrl-C (or a failed run): the runs under way are stopped and those not started dropped,
            # or leaving the pool would wait for them all (a worker goes on to its next run when one
            # is interrupted). The pool's workers are this process's only children. The pool's own
            # thread is then joined here: left running at exit, it races the interpreter's atexit
            # hook for its wake-up pipe (an OSError traceback after the command's last word).
            for child in multiprocessing.active_children():
                child.terminate()
            executor.shutdown(wait=True, cancel_futures=True)
            raise
