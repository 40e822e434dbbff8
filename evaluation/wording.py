"""How the evaluation words what users read: counts with their nouns, cut messages, configurations.

One place for the rules, so the terminal, report.md and the plots say numbers the same way: a count
agrees with its noun ("1 transcript", "2 transcripts"), a cut message ends on a whole word with "...",
and a configuration is named by what a user writes in its config (`preset: evidence`), not by the
harness's label for it.
"""

from __future__ import annotations

import json
from typing import Any

# Nouns whose plural is not noun + "s".
IRREGULAR = {"query": "queries", "match": "matches"}


def plural(count: int, noun: str, many: str | None = None) -> str:
    """`1 transcript`, `2 transcripts`, `1,024 requests` (thousands separated)."""
    word = noun if count == 1 else (many or IRREGULAR.get(noun) or noun + "s")
    return f"{count:,} {word}"


def clip(text: str, limit: int) -> str:
    """`text` within `limit` characters, cut after a whole word and ended with "..." when it is longer."""
    if len(text) <= limit:
        return text
    room = text[: max(0, limit - 3) + 1]
    cut = room.rfind(" ")
    head = room[:cut] if cut > 0 else room[: max(0, limit - 3)]
    return head.rstrip(" ,;:") + "..."


def yaml_value(value: Any) -> str:
    """A config value as a user writes it in YAML: true/false, numbers and plain words bare."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str) and value and value.strip() == value and not value[0].isdigit():
        return value
    return json.dumps(value)


def config_words(config: dict[str, Any], engine: str = "context-simple", default_engine: str = "context-simple") -> str:
    """What a user writes to get a configuration: `the default (no keys)`, `preset: evidence`, ..."""
    if engine == "passthrough":
        return "no compaction (the reference)"
    if engine.startswith("peer-"):
        from .peers import peer_words

        return peer_words(engine, config)
    if engine != default_engine:
        return f"the module {engine} with its defaults"
    if not config:
        return "the default (no keys)"
    keys = sorted(config, key=lambda k: k != "preset")  # the preset first, as the README writes it
    return ", ".join(f"{key}: {yaml_value(config[key])}" for key in keys)


# Where a planted fact sits, as the report and plots name it. The fact in the short mid-session message
# that retracts an instruction is a *retraction*, so that "corrections kept" (the user's long corrections
# kept whole) is the only measure called corrections.
PLACE_NAMES = {
    "user": "user turn",
    "head": "result head",
    "middle": "result middle",
    "end": "result end",
    "correction": "retraction",
}


def place_name(place: str) -> str:
    """The reader's name of a planted-fact place."""
    return PLACE_NAMES.get(place, place)
