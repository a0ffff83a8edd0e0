"""`kill -USR1 <pid>` logs every pending asyncio task of a service with where it waits.

For a job that stopped making progress without an error (a lease no longer renewed, a
checkpoint left PENDING): its stack names the await it is stuck on. The chaos test sends it to
every engine process before it reports a failure.
"""

from __future__ import annotations

import asyncio
import logging
import signal

log = logging.getLogger(__name__)

DUMP_SIGNAL = signal.SIGUSR1
STACK_FRAMES = 12


def dump_tasks() -> int:
    """Log each pending task of the running loop with its awaiting frames; return how many."""
    tasks = sorted(asyncio.all_tasks(), key=lambda t: t.get_name())
    for task in tasks:
        log.warning("task %s:\n%s", task.get_name(), _frames(task))
    log.warning("%d asyncio tasks pending", len(tasks))
    return len(tasks)


def _frames(task: asyncio.Task[object]) -> str:
    """Where `task` waits, innermost last. Built from the frames themselves: a suspended
    coroutine's frame can have no line number, which `Task.print_stack` fails on (3.11)."""
    lines = []
    for frame in task.get_stack(limit=STACK_FRAMES):
        code = frame.f_code
        lines.append(f"  {code.co_filename}:{frame.f_lineno or code.co_firstlineno} in {code.co_name}")
    return "\n".join(lines)


def install_task_dump(loop: asyncio.AbstractEventLoop) -> None:
    loop.add_signal_handler(DUMP_SIGNAL, dump_tasks)


def remove_task_dump(loop: asyncio.AbstractEventLoop) -> None:
    loop.remove_signal_handler(DUMP_SIGNAL)
