"""The checks ``restore_state`` runs on each value of a snapshot (state.py reads the format): a value that
is not what the module itself writes is refused with a ValueError naming it. Moved out of state.py
(issue 38)."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from typing import Any

from . import ledger
from .floor import YIELD_KINDS
from .ladder import kept_whole
from .limit import READINGS
from .refusal import valid_saved as _is_learned
from .repair import tool_call_ids
from .replay import is_real_user_message
from .token_meter import METER_KIND_ESTIMATED, METER_KIND_NONE, METER_KIND_USAGE
from .tool_pairs import is_hook_injection, tool_groups

_METER_KINDS = (METER_KIND_USAGE, METER_KIND_ESTIMATED, METER_KIND_NONE)
# Every number a snapshot carries is bounded: a count no session reaches (past the integers JSON readers
# keep exact) would overflow the float arithmetic of the meter and the input limit on every request.
MAX_COUNT = 2**53 - 1
MAX_LEVEL = 8  # the ladder's last level: the stats' strategy_level, which the next snapshot checks


def _refuse(problem: str) -> ValueError:
    return ValueError(f"context-simple: restore_state refused: {problem}; nothing was changed")


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT


def _bounded(value: Any) -> bool:
    """Every int in ``value`` (an object of counts, flags and strings) is at most ``MAX_COUNT``."""
    if isinstance(value, dict):
        return all(map(_bounded, value.values()))
    return not isinstance(value, int) or isinstance(value, bool) or value <= MAX_COUNT


def _shown(value: Any) -> str:
    """``repr(value)`` for an error message, short, and never failing on an int too long to print."""
    try:
        text = repr(value)
    except ValueError:  # an int past sys.get_int_max_str_digits()
        return "a number too large to print"
    return text if len(text) <= 80 else text[:77] + "..."


def _seqs(value: Any, where: str, message_count: int) -> set[int]:
    if not isinstance(value, list):
        raise _refuse(f"{where} must be a list of message positions, got {type(value).__name__}")
    bad = [s for s in value if not _is_count(s) or s >= message_count]
    if bad:
        raise _refuse(f"{where} holds {_shown(bad[0])}, not a position in a history of {message_count} messages")
    if len(set(value)) != len(value):
        raise _refuse(f"{where} repeats a position")
    return set(value)


def _is_readings(value: Any) -> bool:
    """The input limit's readings (limit.ProviderCount.saved)."""
    if not (isinstance(value, dict) and set(value) == {"events", "pairs"} and _is_count(value["events"])):
        return False
    pairs = value["pairs"]
    return isinstance(pairs, list) and len(pairs) <= READINGS and all(_is_pair(pair) for pair in pairs)


def _is_pair(pair: Any) -> bool:
    return isinstance(pair, list) and len(pair) == 2 and all(_is_count(v) and v >= 1 for v in pair)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and -MAX_COUNT <= value <= MAX_COUNT


def _is_number(value: Any) -> bool:
    if isinstance(value, int) and not isinstance(value, bool):
        return _is_int(value)  # math.isfinite raises OverflowError on an int past a float's range
    return isinstance(value, float) and -MAX_COUNT <= value <= MAX_COUNT


_COUNT = (_is_count, f"an int >= 0, at most {MAX_COUNT}")
# The compaction stats (the notice and the ladder read them): key -> (check, what it must be).
STATS_SCHEMA: dict[str, tuple[Callable[[Any], bool], str]] = {
    **dict.fromkeys(
        (
            "before_tokens",
            "after_tokens",
            "before_messages",
            "after_messages",
            "messages_removed",
            "messages_truncated",
            "user_messages_stubbed",
            "system_messages_preserved",
        ),
        _COUNT,
    ),
    "strategy_level": (lambda v: _is_count(v) and v <= MAX_LEVEL, f"an int from 0 to {MAX_LEVEL}"),
    "budget": (_is_int, f"an int within +-{MAX_COUNT}"),
    "target_tokens": (_is_int, f"an int within +-{MAX_COUNT}"),
    "protected_recent": (_is_number, f"a number within +-{MAX_COUNT}"),
    "protected_tool_results": (_is_int, f"an int within +-{MAX_COUNT}"),
}
OPTIONAL_STATS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "messages_absorbed_by_summary": _COUNT,
    "protected_tool_results_removed": _COUNT,
    "hook_injections_removed": _COUNT,
    # evidence mode (evidence_ledger_share > 0)
    "ledger_lines": _COUNT,
    "ledger_tokens": _COUNT,
    "ledger_sources": _COUNT,
    "ledger_segments": _COUNT,
    # a boundary a provider's refusal (or a repeated far reading) caused (refusal.py)
    "compaction_reason": (lambda v: isinstance(v, str), "a string"),
    "refused_tokens": _COUNT,
    "learned_input_limit": _COUNT,
    "refusal_message": (lambda v: isinstance(v, str), "a string"),
    # the last rung (floor.py): present only when it yielded
    **{f"floor_yield_{kind}": _COUNT for kind in YIELD_KINDS},
}


def _stats(value: Any, where: str) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _refuse(f"{where} must be an object or null, got {type(value).__name__}")
    for key, item in value.items():
        if not isinstance(key, str) or not _is_json(item):
            raise _refuse(f"{where}[{key!r}] must be a JSON value, got {type(item).__name__}")
    missing = sorted(set(STATS_SCHEMA) - set(value))
    unknown = sorted(set(value) - set(STATS_SCHEMA) - set(OPTIONAL_STATS))
    if missing or unknown:
        raise _refuse(f"{where} must hold the compaction stats: missing keys {missing}, unexpected keys {unknown}")
    for key, item in value.items():
        accept, expected = {**STATS_SCHEMA, **OPTIONAL_STATS}[key]
        if not accept(item):
            raise _refuse(f"{where}[{key!r}] must be {expected}, got {_shown(item)}")
    return copy.deepcopy(value)


def _is_json(value: Any) -> bool:
    """True for what JSON can hold: null, booleans, strings, finite numbers, and lists/objects of those."""
    if value is None or isinstance(value, str | bool | int):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(map(_is_json, value))
    return isinstance(value, dict) and all(isinstance(k, str) and _is_json(v) for k, v in value.items())


def _pending(value: Any, where: str, message_count: int) -> dict[str, Any] | None:
    """A finished summary awaiting its swap-in: the positions it absorbs and its text."""
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) != {"seqs", "text"} or not isinstance(value["text"], str):
        raise _refuse(f"{where} must be null or an object with 'seqs' (positions) and 'text' (a string)")
    return {"seqs": frozenset(_seqs(value["seqs"], f"{where}.seqs", message_count)), "text": value["text"]}


def _ledger(value: Any, where: str, message_count: int) -> tuple[int, str, int] | None:
    """The evidence ledger: the seq it is anchored after, its text, and how many removals it covers."""
    if value is None:
        return None
    ok = isinstance(value, dict) and set(value) == {"anchor", "text", "removed"} and isinstance(value["text"], str)
    if not ok or not _is_count(value["removed"]):
        raise _refuse(f"{where} must be null or an object with 'anchor', 'text' and 'removed'")
    (anchor,) = _seqs([value["anchor"]], f"{where}.anchor", message_count)
    return (anchor, value["text"], value["removed"])


def _segments(value: Any, where: str, message_count: int) -> tuple[tuple[int, str, int, int], ...]:
    """Append-only ledger segments (ledger_segments.py): each a ledger with the end of what it covers."""
    if not isinstance(value, list):
        raise _refuse(f"{where} must be a list of segments")
    out = []
    for index, item in enumerate(value):
        if not (isinstance(item, dict) and set(item) == {"anchor", "text", "removed", "end"}):
            raise _refuse(f"{where}[{index}] must hold exactly 'anchor', 'text', 'removed' and 'end'")
        anchor, text, removed = _ledger({k: item[k] for k in ("anchor", "text", "removed")}, where, message_count)
        end = item["end"]
        if not (_is_count(end) and anchor < end <= message_count):
            raise _refuse(f"{where}[{index}].end must be a position after its anchor, got {_shown(end)}")
        out.append((anchor, text, removed, end))
    return tuple(out)


def _calls(value: Any, where: str, history: Sequence[dict[str, Any]]) -> set[tuple[int, str]]:
    """Calls an earlier view answered with repair's synthetic result: [assistant position, call id]."""
    if not isinstance(value, list):
        raise _refuse(f"{where} must be a list of [assistant position, call id] pairs")
    calls = set()
    for item in value:
        ok = isinstance(item, list) and len(item) == 2 and _is_count(item[0]) and item[0] < len(history)
        if not ok or item[1] not in (tool_call_ids(history[item[0]]) or ()):
            raise _refuse(f"{where} holds {_shown(item)}, not an assistant position and one of its call ids")
        calls.add((item[0], item[1]))
    return calls


def _clips(value: Any, where: str, history: Sequence[dict[str, Any]]) -> dict[int, int]:
    """The last rung's clips: [tool result position, tokens kept] pairs."""
    if not isinstance(value, list):
        raise _refuse(f"{where} must be a list of [tool result position, tokens] pairs")
    clips: dict[int, int] = {}
    for item in value:
        ok = isinstance(item, list) and len(item) == 2 and _is_count(item[0]) and item[0] < len(history)
        if not ok or history[item[0]].get("role") != "tool" or not _is_count(item[1]) or item[1] < 1:
            raise _refuse(f"{where} holds {_shown(item)}, not a tool result's position and a number of tokens >= 1")
        if item[0] in clips:
            raise _refuse(f"{where} repeats a position")
        clips[item[0]] = item[1]
    return clips


def _boundary(value: Any, where: str) -> tuple[int, int] | None:
    if value is None:
        return None
    if not (isinstance(value, list | tuple) and len(value) == 2 and all(map(_is_count, value))):
        raise _refuse(f"{where} must be null or a pair of counts, got {_shown(value)}")
    return (value[0], value[1])


def _scalar(kind: str, value: Any, where: str, message_count: int) -> Any:
    checks: dict[str, tuple[Callable[[Any], bool], str]] = {
        "count": (_is_count, f"an int >= 0, at most {MAX_COUNT}"),
        "level": (lambda v: _is_count(v) and v <= MAX_LEVEL, f"an int >= 0, at most {MAX_LEVEL}"),
        "opt_count": (lambda v: v is None or _is_count(v), f"null or an int >= 0, at most {MAX_COUNT}"),
        "opt_position": (lambda v: v is None or (_is_count(v) and v <= message_count), "null or a message position"),
        "opt_kind": (lambda v: v is None or v in _METER_KINDS, f"null or one of {', '.join(_METER_KINDS)}"),
        "flag": (lambda v: isinstance(v, bool), "true or false"),
        "readings": (_is_readings, '{"events": a count, "pairs": at most 8 [count, count] pairs of counts >= 1}'),
        "learned": (
            lambda v: _is_learned(v) and _bounded(v),
            f"null or the learned limit (refusal.RefusalLimit.saved), its counts at most {MAX_COUNT}",
        ),
    }
    accept, expected = checks[kind]
    if not accept(value):
        raise _refuse(f"{where} must be {expected}, got {_shown(value)}")
    return value


def _value(field: Any, value: Any, history: Sequence[dict[str, Any]]) -> Any:
    where, message_count = f"{field.group}.{field.key}", len(history)
    if field.kind == "calls":
        return _calls(value, where, history)
    if field.kind == "clips":
        return _clips(value, where, history)
    if field.kind == "seqs":
        return _seqs(value, where, message_count)
    if field.kind == "stats":
        return _stats(value, where)
    if field.kind == "boundary":
        return _boundary(value, where)
    if field.kind == "pending":
        return _pending(value, where, message_count)
    if field.kind == "ledger":
        return _ledger(value, where, message_count)
    if field.kind == "segments":
        return _segments(value, where, message_count)
    return _scalar(field.kind, value, where, message_count)


def _check_ledger(values: dict[str, Any], history: Sequence[dict[str, Any]]) -> None:
    """A ledger holds only lines of the messages the snapshot removed or stubbed: an edited snapshot
    cannot put text that was never in the history into every later view."""
    texts = [segment[1] for segment in values["_ledger_segments"]]
    texts += [] if values["_ledger"] is None else [values["_ledger"][1]]
    if not texts:
        return
    gone = values["_removed_seqs"] | values["_stubbed_seqs"]
    allowed = ledger.allowed_lines([m for i, m in enumerate(history) if i in gone and m.get("role") != "system"])
    for text in texts:
        lines = ledger.ledger_lines(text)
        if lines is None:
            raise _refuse("sticky.ledger.text is not a ledger (envelope, preamble and closing line)")
        foreign = next((line for line in lines if line not in allowed), None)
        if foreign is not None:
            raise _refuse(f"sticky.ledger.text holds a line no removed or stubbed message has: {foreign[:60]!r}")


def _check_decisions(values: dict[str, Any], history: Sequence[dict[str, Any]]) -> None:
    """Refuse decisions the ladder never makes: each would rewrite or drop what a view must keep."""
    for position in sorted(values["_truncated_seqs"]):
        if history[position].get("role") != "tool":
            role = history[position].get("role")
            raise _refuse(f"sticky.truncated_seqs holds {position}, a {role} message: only tool results are truncated")
    for position in sorted(values["_stubbed_seqs"]):
        if not is_real_user_message(history[position]):
            raise _refuse(f"sticky.stubbed_seqs holds {position}, not a user's own message: only those are stubbed")
        if kept_whole(history[position]):
            raise _refuse(f"sticky.stubbed_seqs holds {position}, a message with an image or other non-text block")
    users = [i for i, m in enumerate(history) if is_real_user_message(m)]
    kept = {users[0], users[-1]} if users else set()
    pending = values["_pending_summary"]
    for where, seqs in (
        ("sticky.removed_seqs", values["_removed_seqs"]),
        ("summary.pending.seqs", pending and pending["seqs"]),
    ):
        hit = sorted(kept & set(seqs or ()))
        if hit:
            raise _refuse(f"{where} holds {hit[0]}, the first or last real user message, which is never removed")


def _close_over_tool_groups(values: dict[str, Any], messages: Sequence[dict[str, Any]]) -> None:
    """A removal that splits a tool group takes the whole group (a lone result or call breaks a view)."""
    groups = _without_duplicates(tool_groups(list(messages)), messages)
    removed = values["_removed_seqs"]
    for position in list(removed):
        removed.update(groups.get(position, ()))
    values["_truncated_seqs"] -= removed
    values["_stubbed_seqs"] -= removed
    for position in removed & set(values["_clipped_seqs"]):
        del values["_clipped_seqs"][position]
    pending = values["_pending_summary"]
    if pending is not None:
        pending["seqs"] = frozenset(m for p in pending["seqs"] for m in (p, *groups.get(p, ())))


def _without_duplicates(
    groups: dict[int, tuple[int, ...]], messages: Sequence[dict[str, Any]]
) -> dict[int, tuple[int, ...]]:
    """Groups as views hold them: without duplicate results, and without late results (stored after the
    group was closed by another message). No view holds those (repair drops them as orphans), so the live
    ladder never records their removal, and the closure must not either (the notice and the evidence
    ledger count removals)."""
    kept: dict[int, tuple[int, ...]] = {}
    for index, group in groups.items():
        end = group[0] + 1
        while end < len(messages) and (messages[end].get("role") == "tool" or is_hook_injection(messages[end])):
            end += 1
        seen: set[Any] = set()
        members = []
        for position in group:
            call_id = messages[position].get("tool_call_id") if messages[position].get("role") == "tool" else None
            if (call_id is not None and call_id in seen) or position >= end:
                continue
            seen.add(call_id)
            members.append(position)
        kept[index] = tuple(members)
    return kept
