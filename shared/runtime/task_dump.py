"""`kill -USR1 <pid>` logs every pending asyncio task of a service with where it waits.

For a job that stopped making progress without an error (a lease no longer renewed, a
checkpoint left PENDING): its stack names the await it is stuck on. The chaos test sends it to
every engine process before it reports a failure.
"""

from __future__ import annotations

import asyncio
import io
import logging
import signal

log = logging.getLogger(__name__)

DUMP_SIGNAL = signal.SIGUSR1
STACK_FRAMES = 12


def dump_tasks() -> int:
    """Log each pending task of the running loop with its awaiting frames; return how many."""
    tasks = sorted(asyncio.all_tasks(), key=lambda t: t.get_name())
    for task in tasks:
        stack = io.StringIO()
        task.print_stack(limit=STACK_FRAMES, file=stack)
        log.warning("task %s:\n%s", task.get_name(), stack.getvalue().rstrip())
    log.warning("%d asyncio tasks pending", len(tasks))
    return len(tasks)


def install_task_dump(loop: asyncio.AbstractEventLoop) -> None:
    loop.add_signal_handler(DUMP_SIGNAL, dump_tasks)


def remove_task_dump(loop: asyncio.AbstractEventLoop) -> None:
    loop.remove_signal_handler(DUMP_SIGNAL)
