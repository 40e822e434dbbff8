"""Minimal reproduction of a crash at interpreter exit in amplifier-core itself (no context module involved).

    uv run python examples/amplifier_core_exit_crash.py            # dies at exit in about 1 run of 3
    uv run python examples/amplifier_core_exit_crash.py --settle   # exits cleanly (the workaround)

A script that emits events through amplifier-core's hook registry and then leaves ``asyncio.run`` can die
after all its work is done with ``Fatal Python error: PyGILState_Release: thread state ... must be current
when releasing`` / ``Python runtime state: finalizing`` (exit status 134) or a segmentation fault (139):
one of the kernel's tokio worker threads still drops a Python object (a bound method of the closed event
loop) while the interpreter finalizes. Letting the loop run a few milliseconds after the last emit, before
``asyncio.run`` returns, gives those threads time to finish while Python is still alive. See
docs/clean-exit.md for the measurements; tests/test_clean_exit.py runs the ``--settle`` form.
"""

import argparse
import asyncio

from amplifier_core import HookRegistry

SETTLE_S = 0.05


async def on_event(event: str, data: dict) -> None:
    return None


async def main(settle: bool) -> None:
    hooks = HookRegistry()
    hooks.register("demo:event", on_event, priority=0, name="demo")
    for i in range(20):
        await hooks.emit("demo:event", {"i": i})
    if settle:
        await asyncio.sleep(SETTLE_S)


if __name__ == "__main__":
    options = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    options.add_argument("--settle", action="store_true", help="let the loop run 50 ms after the last emit")
    asyncio.run(main(settle=options.parse_args().settle))
