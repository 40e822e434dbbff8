"""Start a session from a bundle the way Amplifier apps do: load_bundle -> prepare -> create_session.

Usage: ``python examples/bundle_app.py BUNDLE [TURNS]`` in an environment with amplifier-foundation and
amplifier-core installed and ``uv`` on PATH (``prepare()`` installs each module with ``uv pip install``).
BUNDLE is a file or a URI (git+https://..., git+file://...). It prints the config the context module received, every
compaction, and the module's warnings. docs/bundles.md explains sources, composition and which code runs.
No test runs this file: the tests never need amplifier-foundation.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path
from typing import Any

from amplifier_foundation import load_bundle


async def main(bundle_source: str, turns: int = 6) -> int:
    """Run a few turns; return how many compactions the context module reported."""
    if Path(bundle_source).exists():  # load_bundle reads "dir/bundle.md" (no ./ or /) as a package name
        bundle_source = str(Path(bundle_source).resolve())
    bundle = await load_bundle(bundle_source)
    prepared = await bundle.prepare()  # installs every module that has a `source:`
    context_spec = prepared.mount_plan["session"]["context"]
    print(f"context module: {context_spec['module']} from {context_spec.get('source')}")
    print(f"context config after composition: {context_spec.get('config')}")
    session = await prepared.create_session()
    compactions = 0

    async def on_compaction(event: str, data: dict[str, Any]) -> None:
        nonlocal compactions
        compactions += 1
        print(f"  context:compaction {data['before_tokens']} -> {data['after_tokens']} tokens")

    session.coordinator.hooks.register("context:compaction", on_compaction, priority=100, name="app:compaction")
    context = session.coordinator.get("context")
    print(f"mounted: {type(context).__module__} from {sys.modules[type(context).__module__].__file__}")
    async with session:
        for turn in range(turns):
            reply = await session.execute(f"turn {turn}: please read notes.txt and summarize it")
            print(f"turn {turn}: {reply[:60]!r}")
    print(f"stored history: {len(await context.get_messages())} messages, compactions: {compactions}")
    return compactions


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3) or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if sys.argv[1:2] in (["-h"], ["--help"]) else 2)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    asyncio.run(main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) == 3 else 6))
