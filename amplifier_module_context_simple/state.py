"""Resume-stable compaction state: a versioned, JSON-safe snapshot of every decision that shapes views.

``set_messages()`` (session resume) forgets all sticky decisions, so the first request after a resume
re-decides the whole history and the provider's prompt cache is lost. A snapshot taken with
:func:`build_snapshot` and re-applied with :func:`adopt_snapshot` after ``set_messages()`` of the same
history makes the next view byte-identical to the one the uninterrupted manager would have sent.

Pure functions over the values of the attributes listed in :data:`FIELDS`; nothing here reads the manager.
A snapshot belongs to one history: its digest is taken over the stored messages without ``_seq``, which
is exactly what ``set_messages(await old.get_messages())`` stores again (it re-stamps ``_seq`` 0..N-1).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .estimate import SEQ_KEY, seq_of
from .state_checks import _check_decisions, _check_ledger, _close_over_tool_groups, _is_count, _refuse, _shown, _value
from .state_config import CONFIG_KEY, config_fingerprint, metadata_hint
from .summary import UNVERIFIED

STATE_VERSION = 1
DIGEST_PREFIX = "sha256:"
HEADER_KEYS = ("version", "history_digest", "message_count")


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
    Field("sticky", "level", "_sticky_level", "level"),
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
    # The components (issue 38): each one's state is classified under the manager's name for it
    # (caller_names.FORWARDED), here or in FIELDS.
    "_history": "the stored history (history.py): messages, _next_seq, _store_guard, _warned_block_types",
    "_meter": "the meter (token_meter.py): _last_measured_prompt_tokens, _usage_events, _cache_*, ...",
    "_budget": "the budget (budget.py): _budget_reading, _budget_reported",
    "_tool_results": "tool results and spill (tool_results.py): _derived, _spilled_paths, _tool_name_*",
    "_evidence": "the evidence ledger's caches (evidence.py): _evidence_reads, _segment_cache, _ledger_cache",
    "_summary": "the summary call (summary.py): _summarization_task, _cached_provider, fork-mode scratch",
    "_compaction": "the compaction pass's call-scoped state (compaction.py): _clear_at_least_pending, ...",
    "_spill_failure_reported": "log de-duplication",
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


def build_snapshot(values: dict[str, Any], messages: Sequence[dict[str, Any]], knobs: Any) -> dict[str, Any]:
    """A versioned, JSON-safe dict of the view-shaping state ``values`` (attribute -> value, every one of
    :data:`FIELDS`), tied to the history ``messages``; ``knobs``: the configuration it was taken under."""
    snapshot: dict[str, Any] = {
        "version": STATE_VERSION,
        "history_digest": history_digest(messages),
        "message_count": len(messages),
    }
    for group in GROUPS:
        snapshot[group] = {}
    positions = _Positions(messages)
    for field in FIELDS:
        snapshot[field.group][field.key] = _encode(field.kind, values[field.attribute], positions)
    snapshot[CONFIG_KEY] = config_fingerprint(knobs)  # restore_state says when it differs
    return snapshot


# ----- validating --------------------------------------------------------------------------------


def _header(state: Any, messages: Sequence[dict[str, Any]]) -> int:
    """Check version, shape and history; return the snapshot's message count."""
    if not isinstance(state, dict):
        raise _refuse(f"a state must be a dict (a snapshot_state() result), got {type(state).__name__}")
    version = state.get("version")
    if type(version) is not int or version != STATE_VERSION:
        raise _refuse(f"unknown state version {_shown(version)} (this module reads version {STATE_VERSION})")
    expected = set(HEADER_KEYS) | set(GROUPS)
    if set(state) - {CONFIG_KEY} != expected:  # the configuration's fingerprint is optional (state_config.py)
        missing, extra = sorted(expected - set(state)), sorted(map(str, set(state) - expected - {CONFIG_KEY}))
        raise _refuse(f"malformed state: missing keys {missing}, unexpected keys {extra}")
    count, digest = state["message_count"], state["history_digest"]
    if not _is_count(count) or not isinstance(digest, str) or not digest.startswith(DIGEST_PREFIX):
        raise _refuse(f"malformed state header: message_count={_shown(count)}, history_digest={_shown(digest)}")
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


def adopt_snapshot(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` (from :func:`validate_snapshot`) as ``restore_state`` adopts them: a pending summary is kept
    unverified, its text never adopted into the history (summary.py). Its text is the summarizer's: no check
    can tie it to the history (a ledger's lines are checked), and adopted it would be appended to the
    history and sent in every later view. It still holds its place: the swap refuses it, or discards it, at
    the request the uninterrupted session would have (a dropped one let the trigger ask again a request
    early, and the views parted). Moved from the manager's ``restore_state`` (issue 38)."""
    if values["_pending_summary"] is not None:
        values["_pending_summary"] = {**values["_pending_summary"], UNVERIFIED: True}
    return values


def state_capability(manager: Any) -> dict[str, Any]:
    """The ``context.state`` capability offered to hosts: the format version and the two calls."""
    return {"version": STATE_VERSION, "snapshot": manager.snapshot_state, "restore": manager.restore_state}
