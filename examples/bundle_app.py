"""Start a session from a bundle the way Amplifier apps do: load_bundle -> prepare -> create_session.

Needs amplifier-foundation and amplifier-core in this environment and ``uv`` on PATH (``prepare()`` installs
each module with ``uv pip install``). Prints the config the context module received after composition, which
file and version of it runs, every compaction, and the module's warnings. docs/bundles.md explains sources,
composition and which code runs. The tests run only its --help: they never need amplifier-foundation.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path
from typing import Any


async def main(bundle_source: str, turns: int = 6) -> int:
    """Run a few turns; return how many compactions the context module reported."""
    from amplifier_foundation import load_bundle  # imported here so that --help works without it

    if Path(bundle_source).exists():  # load_bundle reads "dir/bundle.md" (no ./ or /) as a package name
        bundle_source = str(Path(bundle_source).resolve())
    bundle = await load_bundle(bundle_source)
    prepared = await bundle.prepare()  # installs every module that has a `source:`
    context_spec = prepared.mount_plan["session"]["context"]
    print(f"context module: {context_spec['module']} from {context_spec.get('source')}")
    print(f"context config after composition: {context_spec.get('config')}")
    session = await prepared.create_session()
    compactions = 0

    async def on_event(event: str, data: dict[str, Any]) -> None:
        nonlocal compactions
        if event == "context:budget":  # the original sends no module_version
            print(f"  context:budget {data['effective_budget']} tokens, module_version {data.get('module_version')}")
        else:
            compactions += 1
            print(f"  context:compaction {data['before_tokens']} -> {data['after_tokens']} tokens")

    for event in ("context:budget", "context:compaction"):
        session.coordinator.hooks.register(event, on_event, priority=100, name=f"app:{event}")
    context = session.coordinator.get("context")
    print(f"mounted: {type(context).__module__} from {sys.modules[type(context).__module__].__file__}")
    async with session:
        for turn in range(turns):
            reply = await session.execute(f"turn {turn}: please read notes.txt and summarize it")
            print(f"turn {turn}: {reply[:60]!r}")
    print(f"stored history: {len(await context.get_messages())} messages, compactions: {compactions}")
    return compactions


if __name__ == "__main__":
    import argparse

    options = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    options.add_argument("bundle", help="a bundle file (e.g. examples/bundle.md, edited) or URI (git+https://...)")
    options.add_argument("--turns", type=int, default=6, help="user turns to run (default: 6)")
    arguments = options.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("amplifier_module_context_simple").setLevel(logging.INFO)  # its mount line names the copy
    try:
        import amplifier_foundation  # noqa: F401
    except ModuleNotFoundError:
        sys.exit("bundle_app: amplifier-foundation is not installed in this environment (see docs/bundles.md)")
    asyncio.run(main(arguments.bundle, arguments.turns))
