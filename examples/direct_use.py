"""SimpleContextManager without a session: `uv run python examples/direct_use.py` (tests/test_examples.py runs it)."""

import argparse
import asyncio

from amplifier_module_context_simple import SimpleContextManager


async def main() -> list[dict]:
    context = SimpleContextManager(max_tokens=4_000, tool_result_shape="head_tail")
    await context.add_message({"role": "system", "content": "You are a helpful coding agent."})
    await context.add_message({"role": "user", "content": "Find the bug in app.py."})
    for i in range(6):  # tool calls whose results fill the window
        call = {"id": f"c{i}", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
        await context.add_message({"role": "assistant", "content": "", "tool_calls": [call]})
        await context.add_message({"role": "tool", "tool_call_id": f"c{i}", "content": f"line {i}\n" * 300})

    view = await context.get_messages_for_request()  # what you send to the provider
    history = await context.get_messages()  # what you store: never changed by compaction
    print(f"{len(history)} messages stored, {len(view)} sent")
    stats = context.last_compaction_stats  # also the payload of the context:compaction event
    print(f"compacted {stats['before_tokens']} -> {stats['after_tokens']} tokens (level {stats['strategy_level']})")
    return view


async def recall_in_your_own_tool_loop() -> str:
    context = SimpleContextManager(max_tokens=4_000, recall_tool=True)
    await context.add_message({"role": "user", "content": "The deploy key is in ops/keys/deploy-7.pem; go on."})
    tool = context.get_recall_tool()  # mount() registers it in a session; used directly, you offer it
    offered = {"name": tool.name, "description": tool.description, "parameters": tool.input_schema}
    print(f"offer the model the tool {offered['name']!r}; when it calls it, run the call:")
    result = await tool.execute({"query": "deploy key"})  # the arguments of the model's call
    print(result.output)
    return result.output


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__).parse_args()  # --help; the example takes no options
    asyncio.run(main())
    asyncio.run(recall_in_your_own_tool_loop())
