"""Resume-stable compaction state: a versioned, JSON-safe snapshot of every decision that shapes views.

``set_messages()`` (session resume) forgets all sticky decisions, so the first request after a resume
re-decides the whole history and the provider's prompt cache is lost. A snapshot taken with
:func:`build_snapshot` and re-applied with :func:`apply_snapshot` after ``set_messages()`` of the same
history makes the next view byte-identical to the one the uninterrupted manager would have sent.

Pure functions over a manager's attributes (listed in :data:`FIELDS`); nothing here imports the manager.
A snapshot belongs to one history: its digest is taken over the stored messages without ``_seq``, which
is exactly what ``set_messages(await old.get_messages())`` stores again (it re-stamps ``_seq`` 0..N-1).
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from . import ledger
from .estimate import SEQ_KEY, seq_of
from .floor import YIELD_KINDS
from .ladder import kept_whole
from .limit import READINGS
from .refusal import valid_saved as _is_learned
from .repair import tool_call_ids
from .replay import is_real_user_message
from .state_config import CONFIG_KEY, config_fingerprint, metadata_hint
from .token_meter import METER_KIND_ESTIMATED, METER_KIND_NONE, METER_KIND_USAGE
from .tool_pairs import is_hook_injection, tool_groups

STATE_VERSION = 1
DIGEST_PREFIX = "sha256:"
HEADER_KEYS = ("version", "history_digest", "message_count")
_METER_KINDS = (METER_KIND_USAGE, METER_KIND_ESTIMATED, METER_KIND_NONE)


@dataclass(frozen=True)
class Field:
    """One saved manager attribute: where it lives in the snapshot and what kind of value it holds."""

    group: str
    key: str
    attribute: str
    kind: str


FIELDS: tuple[Field, ...] = (
    Field("sticky", "removed_seqs", "_removed_seqs", "seqs"),
    Field("sticky", "truncated_seqs", "_truncated_seqs", "seqs"),
    Field("sticky", "stubbed_seqs", "_stubbed_seqs", "seqs"),
    Field("sticky", "clipped_seqs", "_clipped_seqs", "clips"),
    Field("sticky", "level", "_sticky_level", "count"),
    Field("sticky", "ledger", "_ledger", "ledger"),
    Field("sticky", "ledger_segments", "_ledger_segments", "segments"),
    Field("sticky", "hoist_limit", "_hoist_limit", "opt_position"),
    Field("sticky", "synthetic_calls", "_synthetic_calls", "calls"),
    Field("compaction", "last_stats", "_last_compaction_stats", "stats"),
    Field("meter", "last_measured_prompt_tokens", "_last_measured_prompt_tokens", "opt_count"),
    Field("meter", "anchor_seq", "_anchor_seq", "opt_position"),
    Field("meter", "anchor_estimate", "_anchor_estimate", "opt_count"),
    Field("meter", "last_sent_estimate", "_last_sent_estimate", "opt_count"),
    Field("meter", "last_hybrid_tokens", "_last_hybrid_tokens", "opt_count"),
    Field("meter", "last_hybrid_kind", "_last_hybrid_kind", "opt_kind"),
    Field("meter", "last_hybrid_anchored", "_last_hybrid_anchored", "opt_count"),
    Field("meter", "usage_events", "_usage_events", "count"),
    Field("meter", "input_readings", "_input_readings", "readings"),
    Field("meter", "learned_limit", "_learned_limit", "learned"),
    Field("meter", "cache_read_total", "_cache_read_total", "count"),
    Field("meter", "cache_write_total", "_cache_write_total", "count"),
    Field("meter", "cache_fields_complete", "_cache_fields_complete", "flag"),
    Field("meter", "provenance_refusals", "_provenance_refusals", "count"),
    Field("meter", "provenance_overrides", "_provenance_overrides", "count"),
    Field("meter", "anchor_floor_fires", "_anchor_floor_fires", "count"),
    Field("clear_at_least", "consecutive_skips", "_clear_at_least_skips", "count"),
    Field("summary", "absorbed_count", "_summary_absorbed_count", "count"),
    Field("summary", "failures", "_summarization_failures", "count"),
    Field("summary", "armed", "_summary_armed", "flag"),
    Field("summary", "cooldown_left", "_summary_cooldown_left", "count"),
    Field("summary", "pending", "_pending_summary", "pending"),
    Field("replay", "last_boundary", "_last_replayed_boundary", "boundary"),
)
# Keys added after version 1 shipped: a snapshot without them is read as holding the empty value.
# Keys a snapshot of an earlier version may lack; the default is what that version did (hoist_limit None:
# every instruction leads a compacted view).
OPTIONAL: dict[tuple[str, str], Any] = {
    ("sticky", "ledger"): None,
    ("sticky", "hoist_limit"): None,
    ("sticky", "ledger_segments"): [],
    ("sticky", "synthetic_calls"): [],
    ("sticky", "clipped_seqs"): [],
    ("meter", "input_readings"): {"events": 0, "pairs": []},
    ("meter", "learned_limit"): None,
}
GROUPS: tuple[str, ...] = tuple(dict.fromkeys(field.group for field in FIELDS))

# Manager attributes deliberately NOT in a snapshot, and why (tests check every attribute is classified).
NOT_SAVED: dict[str, str] = {
    "_decisions": "holds the decisions classified here (decisions.py); replaced with the history",
    "_store_guard": "flags an in-place edit of the stored history (wire_copy.py); a new history starts unedited",
    "_hooks": "the host's hook registry",
    "_repair_mirror": "cache (the repaired working list and its settled point, rebuilt on demand)",
    "_recall_mounted": "set by mount() when it mounts context_recall; a resumed session mounts it again",
    "_explicit_keys": "configuration bookkeeping (the keys the caller gave), not a decision about the history",
    "_evidence_reads": "cache (the ledger's reading of each message, recomputed on demand)",
    "_tail_scan": "cache (the hybrid tail's positions in the working list, read again on demand)",
    "_recall_texts": "cache (context_recall's searchable texts, rebuilt on demand)",
    "_ingress": "cache (clipped view copies of oversized tool results, a pure function of content and cap)",
    "_budget_reading": "this request's budget, recomputed on every request",
    "_budget_reported": "the last context:budget payload; a resumed session reports its budget again",
    "_input_limit": "the provider's input limit (limit.py): its readings are saved as meter.input_readings",
    "_refusal": "what the provider's refusals taught (refusal.py): saved as meter.learned_limit",
    "messages": "the history itself: restored by set_messages()",
    "_next_seq": "re-stamped by set_messages()",
    "_tool_name_by_call_id": "derived from the history by set_messages()",
    "_tool_name_by_seq": "derived from the history by set_messages()",
    "_tool_names_harvested": "derived from the history by set_messages()",
    "_system_prompt_factory": "the host registers it again",
    "_last_good_system_prompt": "only a fallback while the factory fails; the factory is asked again",
    "_spilled_paths": "write-once bookkeeping: spill files are content-addressed and idempotent",
    "_fault_counts": "diagnostics",
    "_reported_repairs": "log de-duplication",
    "_warned_block_types": "log de-duplication",
    "_told_once": "log de-duplication (a non-async hooks.emit, a view given to set_messages)",
    "_said_warnings": "log de-duplication (configuration warnings said once per session)",
    "_counts_key": "cache",
    "_count_cache": "cache (per-_seq counts, recomputed on demand)",
    "_derived": "cache (truncated and stubbed rewrites, recomputed on demand)",
    "_segment_cache": "cache (the kept segments' message objects, rebuilt from sticky.ledger_segments)",
    "_ledger_cache": "cache (the ledger message object, rebuilt from sticky.ledger on demand)",
    "_view_cache": "cache (the last view, extended between boundaries; rebuilt on demand)",
    "_escalation_allowed": "set and reset within one request",
    "_clear_at_least_pending": "set and reset within one request",
    "_clear_at_least_last_refused": "set and reset within one request",
    "_last_token_meter_stats": "report of the last request; recomputed before it is read",
    "_measurement_stale": "derived by restore_state from meter.anchor_seq",
    "_prompt_path_reported": "log de-duplication",
    "_is_summarizing": "a running summary call is not resumable (a finished one is: summary.pending)",
    "_summarization_task": "a running summary call is not resumable (a finished one is: summary.pending)",
    "_summary_generation": "invalidates a running summary call when the history is replaced",
    "_fork_reasons_logged": "log de-duplication",
    "_last_request_view": "fork-mode scratch for the next summary call",
    "_view_serial": "fork-mode scratch for the next summary call",
    "_sent_messages": "fork-mode scratch for the next summary call",
    "_sent_serial": "fork-mode scratch for the next summary call",
    "_sent_tools": "fork-mode scratch for the next summary call",
    "_sent_tools_supplied": "fork-mode scratch for the next summary call",
    "_sent_model": "fork-mode scratch for the next summary call",
    "_summary_fork_fallbacks": "diagnostics",
    "_fork_prefix_source": "diagnostics",
    "_last_summary_call": "diagnostics",
    "_cached_provider": "the host passes the provider again",
}


# ----- the history digest ------------------------------------------------------------------------


def _json_key(key: Any) -> str:
    """A dict key as ``json.dumps`` writes it (so a JSON round trip cannot change the digest)."""
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool | int | float):
        return json.dumps(key)
    return str(key)


def _jsonable(value: Any) -> Any:
    """``value`` with every dict key a str, as JSON writes it, and tuples as lists (leaves go through ``str``)."""
    if isinstance(value, dict):
        return {_json_key(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def _canonical(message: dict[str, Any]) -> str:
    """Canonical JSON of a stored message without ``_seq`` (ASCII, sorted keys, compact)."""
    metadata = message.get("metadata")
    if isinstance(metadata, dict) and SEQ_KEY in metadata:
        message = {**message, "metadata": {k: v for k, v in metadata.items() if k != SEQ_KEY}}
    options: dict[str, Any] = {"sort_keys": True, "separators": (",", ":"), "ensure_ascii": True, "default": str}
    try:
        return json.dumps(message, **options)
    except TypeError:  # mixed-type keys cannot be sorted; normalize them as JSON would
        return json.dumps(_jsonable(message), **options)


def history_digest(messages: Sequence[dict[str, Any]]) -> str:
    """sha256 over the canonical JSON of each message, ``_seq`` excluded (stable across set_messages)."""
    digest = hashlib.sha256()
    for message in messages:
        digest.update(_canonical(message).encode("ascii"))
        digest.update(b"\n")
    return DIGEST_PREFIX + digest.hexdigest()


# ----- building ----------------------------------------------------------------------------------


class _Positions:
    """Sequence number -> position in the stored history: what ``set_messages()`` re-stamps ``_seq`` to.

    Normally the same number; translating keeps a snapshot right even when they differ (a message
    appended to ``messages`` directly, without a ``_seq``).
    """

    def __init__(self, messages: Sequence[dict[str, Any]]) -> None:
        self.count = len(messages)
        self.by_seq = {seq: i for i, m in enumerate(messages) if (seq := seq_of(m)) is not None}

    def seqs(self, seqs: Any) -> list[int]:
        return sorted(self.by_seq[s] for s in seqs if s in self.by_seq)

    def boundary(self, seq: int | None) -> int | None:
        """The position of the first message stamped ``seq`` or later (the meter's anchor)."""
        if seq is None:
            return None
        return min((i for s, i in self.by_seq.items() if s >= seq), default=self.count)


def _encode(kind: str, value: Any, positions: _Positions) -> Any:
    if kind == "seqs":
        return positions.seqs(value)
    if kind == "opt_position":
        return positions.boundary(value)
    if kind == "boundary":
        return None if value is None else list(value)
    if kind == "stats":
        return None if value is None else json.loads(json.dumps(value, default=str))
    if kind == "pending":
        return None if value is None else {"seqs": positions.seqs(value["seqs"]), "text": value["text"]}
    if kind == "ledger":
        if value is None:
            return None
        return {"anchor": positions.boundary(value[0]), "text": value[1], "removed": value[2]}
    if kind == "calls":
        return sorted([positions.by_seq[seq], call_id] for seq, call_id in value if seq in positions.by_seq)
    if kind == "clips":
        return sorted([positions.by_seq[seq], tokens] for seq, tokens in value.items() if seq in positions.by_seq)
    if kind == "segments":
        return [
            {"anchor": positions.boundary(a), "text": t, "removed": r, "end": positions.boundary(e)}
            for a, t, r, e in value
        ]
    return value


def build_snapshot(manager: Any) -> dict[str, Any]:
    """A versioned, JSON-safe dict of the manager's view-shaping state, tied to its current history."""
    snapshot: dict[str, Any] = {
        "version": STATE_VERSION,
        "history_digest": history_digest(manager.messages),
        "message_count": len(manager.messages),
    }
    for group in GROUPS:
        snapshot[group] = {}
    positions = _Positions(manager.messages)
    for field in FIELDS:
        snapshot[field.group][field.key] = _encode(field.kind, getattr(manager, field.attribute), positions)
    snapshot[CONFIG_KEY] = config_fingerprint(manager)  # restore_state says when it differs
    return snapshot


# ----- validating --------------------------------------------------------------------------------


def _refuse(problem: str) -> ValueError:
    return ValueError(f"context-simple: restore_state refused: {problem}; nothing was changed")


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _seqs(value: Any, where: str, message_count: int) -> set[int]:
    if not isinstance(value, list):
        raise _refuse(f"{where} must be a list of message positions, got {type(value).__name__}")
    bad = [s for s in value if not _is_count(s) or s >= message_count]
    if bad:
        raise _refuse(f"{where} holds {bad[0]!r}, not a position in a history of {message_count} messages")
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
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


_COUNT = (_is_count, "an int >= 0")
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
    "strategy_level": (lambda v: _is_count(v) and v <= 8, "an int from 0 to 8"),
    "budget": (_is_int, "an int"),
    "target_tokens": (_is_int, "an int"),
    "protected_recent": (_is_number, "a finite number"),
    "protected_tool_results": (_is_int, "an int"),
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
            raise _refuse(f"{where}[{key!r}] must be {expected}, got {item!r}")
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
            raise _refuse(f"{where}[{index}].end must be a position after its anchor, got {end!r}")
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
            raise _refuse(f"{where} holds {item!r}, not an assistant position and one of its call ids")
        calls.add((item[0], item[1]))
    return calls


def _clips(value: Any, where: str, history: Sequence[dict[str, Any]]) -> dict[int, int]:
    """The last rung's clips: [tool result position, tokens kept] pairs."""
    if not isinstance(value, list):
        raise _refuse(f"{where} must be a list of [tool result position, tokens] pairs")
    clips: dict[int, int] = {}
    for item in value:
        ok = isinstance(item, list) and len(item) == 2 and _is_count(item[0]) and item[0] < len(history)
        if not ok or history[item[0]].get("role") != "tool" or not _is_int(item[1]) or item[1] < 1:
            raise _refuse(f"{where} holds {item!r}, not a tool result's position and a number of tokens >= 1")
        if item[0] in clips:
            raise _refuse(f"{where} repeats a position")
        clips[item[0]] = item[1]
    return clips


def _boundary(value: Any, where: str) -> tuple[int, int] | None:
    if value is None:
        return None
    if not (isinstance(value, list | tuple) and len(value) == 2 and all(map(_is_count, value))):
        raise _refuse(f"{where} must be null or a pair of counts, got {value!r}")
    return (value[0], value[1])


def _scalar(kind: str, value: Any, where: str, message_count: int) -> Any:
    checks: dict[str, tuple[Callable[[Any], bool], str]] = {
        "count": (_is_count, "an int >= 0"),
        "opt_count": (lambda v: v is None or _is_count(v), "null or an int >= 0"),
        "opt_position": (lambda v: v is None or (_is_count(v) and v <= message_count), "null or a message position"),
        "opt_kind": (lambda v: v is None or v in _METER_KINDS, f"null or one of {', '.join(_METER_KINDS)}"),
        "flag": (lambda v: isinstance(v, bool), "true or false"),
        "readings": (_is_readings, '{"events": an int >= 0, "pairs": at most 8 [count, count] pairs of ints >= 1}'),
        "learned": (_is_learned, "null or the learned limit (refusal.RefusalLimit.saved)"),
    }
    accept, expected = checks[kind]
    if not accept(value):
        raise _refuse(f"{where} must be {expected}, got {value!r}")
    return value


def _value(field: Field, value: Any, history: Sequence[dict[str, Any]]) -> Any:
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


def _header(state: Any, messages: Sequence[dict[str, Any]]) -> int:
    """Check version, shape and history; return the snapshot's message count."""
    if not isinstance(state, dict):
        raise _refuse(f"a state must be a dict (a snapshot_state() result), got {type(state).__name__}")
    version = state.get("version")
    if type(version) is not int or version != STATE_VERSION:
        raise _refuse(f"unknown state version {version!r} (this module reads version {STATE_VERSION})")
    expected = set(HEADER_KEYS) | set(GROUPS)
    if set(state) - {CONFIG_KEY} != expected:  # the configuration's fingerprint is optional (state_config.py)
        missing, extra = sorted(expected - set(state)), sorted(map(str, set(state) - expected - {CONFIG_KEY}))
        raise _refuse(f"malformed state: missing keys {missing}, unexpected keys {extra}")
    count, digest = state["message_count"], state["history_digest"]
    if not _is_count(count) or not isinstance(digest, str) or not digest.startswith(DIGEST_PREFIX):
        raise _refuse(f"malformed state header: message_count={count!r}, history_digest={digest!r}")
    if count > len(messages):
        raise _refuse(f"the state is for a history of {count} messages, but only {len(messages)} are stored")
    if history_digest(messages[:count]) != digest:
        raise _refuse(
            f"the state belongs to a different history (the first {count} stored messages do not match its "
            "digest); call set_messages() with the history the state was saved with" + metadata_hint(messages[:count])
        )
    return count


def validate_snapshot(state: Any, messages: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Check a snapshot completely against ``messages``; return attribute -> value, or raise ValueError.

    The stored history may extend the snapshot's (messages added after it was taken): decisions are
    keyed by position, and those positions still hold the same messages.
    """
    count = _header(state, messages)
    for group in GROUPS:
        keys = {field.key for field in FIELDS if field.group == group}
        section = state[group]
        if isinstance(section, dict):
            section = {**{k: v for (g, k), v in OPTIONAL.items() if g == group}, **section}
            state = {**state, group: section}
        if not isinstance(section, dict) or set(section) != keys:
            got = sorted(map(str, section)) if isinstance(section, dict) else type(section).__name__
            raise _refuse(f"malformed state: {group} must hold exactly {sorted(keys)}, got {got}")
    history = messages[:count]
    values = {field.attribute: _value(field, state[field.group][field.key], history) for field in FIELDS}
    if values["_removed_seqs"] & (values["_truncated_seqs"] | values["_stubbed_seqs"] | set(values["_clipped_seqs"])):
        raise _refuse("malformed state: a removed position is also marked truncated, stubbed or clipped")
    _check_decisions(values, history)
    _close_over_tool_groups(values, messages)
    _check_ledger(values, history)
    return values


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


def apply_snapshot(manager: Any, values: dict[str, Any]) -> None:
    """Forget the manager's current decisions and adopt ``values`` (from :func:`validate_snapshot`)."""
    manager._reset_compaction_state()
    for attribute, value in values.items():
        setattr(manager, attribute, value)


def state_capability(manager: Any) -> dict[str, Any]:
    """The ``context.state`` capability offered to hosts: the format version and the two calls."""
    return {"version": STATE_VERSION, "snapshot": manager.snapshot_state, "restore": manager.restore_state}
