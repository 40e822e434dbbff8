"""Arms: named configurations run on the same workloads. A new arm is one line in `ARMS`.

Engines are Amplifier context modules loaded by entry-point name (group `amplifier.modules`), plus
the in-harness `passthrough` reference that never compacts. An arm whose config the installed module
rejects at mount (ValueError/TypeError) or never reads is reported as "not available".
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from .peers import CLEARING, MASKING, mounter
from .standin import mount_passthrough, mount_standin

DEFAULT_ENGINE = "context-simple"
PASSTHROUGH = "passthrough"
LOCAL_ENGINES: dict[str, Callable[..., Any]] = {
    PASSTHROUGH: mount_passthrough,
    MASKING: mounter(MASKING),
    CLEARING: mounter(CLEARING),
}


@dataclass(frozen=True)
class Arm:
    """One named configuration of one engine."""

    name: str
    config: dict[str, Any] = field(default_factory=dict)
    notes: str = ""
    engine: str = DEFAULT_ENGINE


ARMS: list[Arm] = [
    Arm("none", {}, "reference: no compaction, the whole history every request", PASSTHROUGH),
    Arm("progressive", {}, "the default configuration"),
    Arm("target_0.3", {"target_usage": 0.3}, "compacts deeper: down to 30% of the budget (default 50%)"),
    Arm("target_0.2", {"target_usage": 0.2}, "compacts deeper still: down to 20% of the budget"),
    Arm("tool_budget_head", {"tool_result_budget_tokens": 250}, "truncated tool results keep 1,000 head chars"),
    Arm(
        "head_tail",
        {"tool_result_budget_tokens": 250, "tool_result_shape": "head_tail"},
        "truncated tool results keep 500 head + 500 tail chars",
    ),
    Arm("meter_actual", {"token_meter": "actual"}, "compaction gated on the provider's reported usage"),
    Arm("meter_hybrid", {"token_meter": "hybrid"}, "reported usage plus an estimate of the new tail"),
    Arm("clear_at_least", {"compact_clear_at_least": 0.2}, "refuse rebuilds freeing < 20% of the budget"),
    Arm("replay", {"replay_last_user_on_compaction": True}, "replays the last user message after compaction"),
    Arm(
        "summary",
        {"compaction_strategy": "summary"},
        "scripted deterministic summarizer: a mechanism test, not a quality claim",
    ),
    Arm(
        "summary_floor",
        {"compaction_strategy": "summary", "summary_min_absorb_tokens": 0.55},
        "summary with the recommended refire lever (span floor 0.55 x budget); scripted summarizer",
    ),
    Arm("counter_content", {"token_counter": "content"}, "module sizes with the billable-content counter"),
    Arm("counter_tiktoken", {"token_counter": "tiktoken:o200k_base"}, "module sizes with exact o200k counts"),
    Arm("notice_minimal", {"compaction_notice_verbosity": "minimal"}, "the one-sentence compaction notice"),
    Arm("ev_ledger", {"evidence_ledger_share": 0.5}, "evidence: removed messages leave their key lines (ledger)"),
    Arm("preset_evidence", {"preset": "evidence"}, "the shipped `evidence` preset"),
    Arm("preset_evidence_lean", {"preset": "evidence_lean"}, "the shipped `evidence_lean` preset"),
    Arm("preset_evidence_balanced", {"preset": "evidence_balanced"}, "the shipped `evidence_balanced` preset"),
    Arm(
        "segments_evidence",
        {"preset": "evidence", "evidence_ledger_segments": True},
        "`evidence` with an append-only ledger (segments, line economy)",
    ),
    Arm(
        "segments_balanced",
        {"preset": "evidence_balanced", "evidence_ledger_segments": True},
        "`evidence_balanced` with an append-only ledger",
    ),
    # Peers (evaluation/peers.py): what users pick instead, replayed the same way; not this module.
    Arm(
        "peer_observation_masking",
        {"keep_tool_turns": 10},
        "peer: results older than the last 10 tool turns become a one-line placeholder (Lindenbauer et al. 2025)",
        MASKING,
    ),
    Arm(
        "peer_observation_masking_m5",
        {"keep_tool_turns": 5},
        "peer: observation masking keeping the last 5 tool turns",
        MASKING,
    ),
    Arm(
        "peer_clear_tool_uses",
        {"trigger_share": 0.5, "keep": 3},
        "peer: Anthropic's clear_tool_uses_20250919 with its defaults, the 100,000-token trigger taken as "
        "0.5 of the window (100k of 200k)",
        CLEARING,
    ),
]

# What a user picks between (the README's presets section): the default and the shipped presets. The
# run's advice ranks these; the other arms are single knobs and experiments, shown in the tables.
CHOICES = ("progressive", "preset_evidence", "preset_evidence_balanced", "preset_evidence_lean")
# A documented knob added to a choice (README, `evidence_ledger_segments`): the advice says what it adds.
REFINEMENTS = {"segments_evidence": "preset_evidence"}
PEERS = tuple(a.name for a in ARMS if a.engine in (MASKING, CLEARING))


def arm_by_name(name: str) -> Arm:
    """Look an arm up in the table."""
    for arm in ARMS:
        if arm.name == name:
            return arm
    raise KeyError(f"unknown arm {name!r}; known: {', '.join(a.name for a in ARMS)}")


def engine_arm(engine: str) -> Arm:
    """An arm running another installed context module with its own defaults."""
    return Arm(f"engine:{engine}", {}, f"installed module {engine!r} with its defaults", engine)


def load_engine(name: str) -> tuple[Callable[..., Any], str]:
    """The mount function of an engine and a label saying what actually ran."""
    if name in LOCAL_ENGINES:
        return LOCAL_ENGINES[name], f"in-harness {name}"
    found = [ep for ep in entry_points(group="amplifier.modules") if ep.name == name]
    if not found:
        raise LookupError(f"no Amplifier module {name!r} in entry-point group amplifier.modules")
    try:
        return found[0].load(), f"{name} ({found[0].value})"
    except (ImportError, AttributeError) as exc:
        if name != DEFAULT_ENGINE:
            raise
        return mount_standin, f"STAND-IN (the installed {name} could not be loaded: {exc})"


def ignored_keys(arm: Arm) -> list[str]:
    """Config keys that the engine's source never mentions, i.e. keys it would silently ignore."""
    if arm.engine in LOCAL_ENGINES or not arm.config:
        return []
    mount, label = load_engine(arm.engine)
    if label.startswith("STAND-IN"):
        return []  # the stand-in rejects unknown keys at mount instead
    text = _package_source(mount.__module__)
    return [k for k in arm.config if f'"{k}"' not in text and f"'{k}'" not in text]


@cache
def _package_source(module_name: str) -> str:
    """All Python source of the package that defines `module_name`."""
    module = importlib.import_module(module_name.split(".")[0])
    path = Path(getattr(module, "__file__", "") or "")
    files = sorted(path.parent.rglob("*.py")) if path.name == "__init__.py" else [path]
    return "\n".join(f.read_text(encoding="utf-8", errors="replace") for f in files if f.is_file())
