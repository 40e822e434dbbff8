"""Configuration as users meet it (issues 31 and 33): numbers written as strings, keys amplifier-foundation's
bundles carry, one warning per problem per session, typos that warn instead of stopping a session, the spill
directory checked at mount, the repair warning in words, and which copy of the module runs."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import tomllib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from amplifier_core.testing import MockCoordinator
from amplifier_core.validation import ContextValidator

import amplifier_module_context_simple as package
from amplifier_module_context_simple import SimpleContextManager, mount
from amplifier_module_context_simple.config import DEFAULTS, parse_config
from tests.conftest import BIG, Recorder, asst, asst_calls, build, result, stamped, system, user

LOGGER = "amplifier_module_context_simple"
ROOT = Path(__file__).resolve().parent.parent
PACKAGE_DIR = Path(package.__file__).resolve().parent
ONE_MILLION = SimpleNamespace(
    get_model_info=lambda: SimpleNamespace(context_window=1_000_000, max_output_tokens=128_000)
)  # derived budget 931,904

# amplifier-foundation's own bundles (bundle.md, bundles/anchors*, experiments/*) set exactly these.
FOUNDATION_CONFIG = {"max_tokens": 300000, "compact_threshold": 0.8, "auto_compact": True}


def warnings_of(caplog: Any, *words: str) -> list[str]:
    texts = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    return [text for text in texts if all(word in text for word in words)]


async def mounted(config: Any) -> SimpleContextManager:
    coordinator = MockCoordinator()
    await mount(coordinator, config)
    return coordinator.get("context")


async def views_of(ctx: SimpleContextManager, spec: str = "S U T* T* T* A U T* T* A U") -> list[str]:
    """Serve one request per user or tool message of a session that compacts; the views as JSON."""
    views = []
    for message in build(spec):
        await ctx.add_message(stamped(message))
        if message["role"] in ("user", "tool"):
            views.append(json.dumps(await ctx.get_messages_for_request(token_budget=BIG), sort_keys=True))
    assert ctx._last_compaction_stats is not None, "the session must compact for the comparison to mean much"
    return views


# ----- issue 31 item 1: one rule for numbers -----------------------------------------------------------

# A valid value of every numeric key (none of them warns as a number).
NUMBERS: dict[str, int | float] = {
    "max_tokens": 5000,
    "max_tokens_fallback": 90_000,
    "max_tool_result_bytes": 65_536,
    "compact_threshold": 0.8,
    "target_usage": 0.4,
    "protected_recent": 0.25,
    "protected_tool_results": 3,
    "truncate_chars": 100,
    "compaction_notice_token_reserve": 500,
    "compaction_notice_min_level": 2,
    "output_reserve_fraction": 0.4,
    "compact_clear_at_least": 0.2,
    "compact_max_consecutive_skips": 4,
    "summary_trigger": 0.7,
    "summarization_timeout_s": 12.5,
    "summary_rearm_below": 0.4,
    "summary_cooldown_requests": 2,
    "summary_min_absorb_tokens": 100,
    "tool_result_budget_tokens": 300,
    "max_messages": 50,
    "evidence_ledger_share": 0.5,
    "user_words_share": 0.2,
    "max_tool_result_share": 0.25,
}


@pytest.mark.asyncio
async def test_a_quoted_max_tokens_caps_the_budget_like_the_number(caplog):
    """It ran with no cap at all (budget 931,904 for a 1M window instead of 5,000), in silence."""
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        ctx = await mounted({"max_tokens": "5000"})
    assert ctx.max_tokens == 5000 and ctx._calculate_budget(None, ONE_MILLION) == 5000
    said = warnings_of(caplog, "max_tokens='5000'")
    assert len(said) == 1 and "read as the number 5000" in said[0] and len(caplog.records) == 1


@pytest.mark.asyncio
@pytest.mark.parametrize("key", sorted(NUMBERS))
async def test_every_numeric_key_reads_a_number_written_as_a_string(key, caplog):
    """``target_usage: "0.5"`` aborted the session start; every numeric key now follows one rule."""
    number = NUMBERS[key]
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        as_number = parse_config({key: number})
        assert not caplog.records, f"{key}={number!r} is meant to be a valid value"
        as_string = parse_config({key: f" {number} "})  # as a YAML or environment variable value gives it
        ctx = await mounted({key: str(number)})
    assert as_string == as_number and getattr(ctx, key) == as_number[key]
    said = warnings_of(caplog, key, "is a string; read as the number")
    assert len(said) == 2, said  # " 5000 " and "5000" are two values, each said once


def test_the_numeric_keys_are_every_key_with_a_number_default():
    from amplifier_module_context_simple.config import NUMERIC_KEYS

    numeric_defaults = {k for k, v in DEFAULTS.items() if isinstance(v, int | float) and not isinstance(v, bool)}
    assert numeric_defaults <= set(NUMERIC_KEYS) == set(NUMBERS)


@pytest.mark.asyncio
async def test_a_number_read_from_a_string_then_follows_the_keys_own_rule(caplog):
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        ctx = await mounted({"protected_tool_results": "-3", "compact_threshold": "1.5"})
    assert ctx.protected_tool_results == 0 and ctx.compact_threshold == 1.5
    assert warnings_of(caplog, "protected_tool_results=-3 is below 0")
    assert warnings_of(caplog, "compact_threshold=1.5 is outside")


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("key", "value", "outcome"),
    [
        ("max_tokens", "lots", None),  # the key's rule: warned, no cap
        ("max_tokens", "inf", None),
        ("compact_threshold", "high", ValueError),  # the key's rule: a fraction must be a number
        ("compact_threshold", "nan", ValueError),
        ("summarization_timeout_s", "soon", ValueError),
    ],
)
async def test_a_string_that_is_no_finite_number_follows_the_keys_rule(key, value, outcome):
    if outcome is ValueError:
        with pytest.raises(ValueError, match=key):
            await mounted({key: value})
    else:
        assert getattr(await mounted({key: value}), key) is outcome


def test_a_per_tool_budget_written_as_a_string_is_read_as_the_number(caplog):
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        options = parse_config({"tool_result_budget_by_tool": {"bash": "300", "grep": "lots"}})
    assert options["tool_result_budget_by_tool"] == {"bash": 300}
    assert warnings_of(caplog, "tool_result_budget_by_tool['bash']='300' is a string")
    assert warnings_of(caplog, "'grep'='lots' dropped")


# ----- issue 31 item 2: max_messages is accepted and ignored, whatever its value ------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize(("value", "odd"), [(1, False), (50, False), (None, False), (0, True), (-5, True), ("x", True)])
async def test_max_messages_never_blocks_the_mount_and_changes_no_view(value, odd, caplog):
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        ctx = await mounted({"max_messages": value})
    assert ctx.max_messages == value
    assert len(warnings_of(caplog, "max_messages", "ignored anyway")) == int(odd)
    if value == 1:  # ignored: the views are the default's
        assert await views_of(ctx) == await views_of(SimpleContextManager())


# ----- issue 31 item 3: the spill directory, checked at mount ------------------------------------------


async def spilling_session(ctx: SimpleContextManager) -> list[dict[str, Any]]:
    """Twelve huge tool results under a budget that truncates most of them."""
    for message in build("S U " + "T* " * 12 + "A U"):
        await ctx.add_message(stamped(message))
    return await ctx.get_messages_for_request(token_budget=BIG * 2)


@pytest.mark.asyncio
async def test_an_unusable_spill_directory_is_named_once_at_mount_and_its_failures_counted(tmp_path, caplog):
    """A file as the spill directory mounted silently, then logged one failure per truncated result."""
    hostname = tmp_path / "hostname"
    hostname.write_text("box\n")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        ctx = await mounted({"tool_result_spill_dir": str(hostname), "protected_tool_results": 1})
        assert len(warnings_of(caplog, "tool_result_spill_dir", "is not a directory")) == 1, "said at mount"
        view = await spilling_session(ctx)
        await ctx.get_messages_for_request(token_budget=BIG * 2)
    assert any(m.get("role") == "tool" and f"read {hostname}/tool-result-" in str(m.get("content")) for m in view)
    assert ctx.fault_stats["spill_write_failures"] >= 5  # one per truncated result, all counted
    assert len(warnings_of(caplog, "spill")) == 1 and hostname.read_text() == "box\n"


@pytest.mark.asyncio
async def test_a_spill_directory_that_fails_later_is_logged_once_and_counted_every_time(tmp_path, caplog):
    spill = tmp_path / "spill" / "session"  # missing but creatable: no warning, nothing created at mount
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        ctx = await mounted({"tool_result_spill_dir": str(spill), "protected_tool_results": 1})
        assert not caplog.records and not (tmp_path / "spill").exists()
        (tmp_path / "spill").write_text("now a file")  # the disk changes under the session
        await spilling_session(ctx)
    said = warnings_of(caplog, "spill write failed")
    assert len(said) == 1 and "counted in fault_stats" in said[0] and len(caplog.records) == 1
    assert ctx.fault_stats["spill_write_failures"] >= 5


@pytest.mark.parametrize("kind", ["missing", "existing"])
def test_a_usable_spill_directory_is_silent_at_construction(tmp_path, caplog, kind):
    spill = tmp_path / "out"
    if kind == "existing":
        spill.mkdir(mode=0o700)  # private whatever the umask (a group-writable one is refused: tool_results)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        SimpleContextManager(tool_result_spill_dir=spill)
    assert not caplog.records and spill.exists() == (kind == "existing")


# ----- issue 31 item 4: the repair warning in words ---------------------------------------------------


@pytest.mark.asyncio
async def test_the_repair_warning_names_the_call_ids_and_what_was_done(caplog):
    ctx = SimpleContextManager()
    broken = [
        system(),
        user("go"),
        asst_calls("call_a", "call_b"),
        result("call_b", "b done"),  # call_a never got its result (a crash)
        result("call_zz", "an orphan"),  # answers no call
        asst("done"),
        user("next"),
    ]
    for message in broken:
        await ctx.add_message(stamped(message))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        await ctx.get_messages_for_request(token_budget=BIG)
        await ctx.get_messages_for_request(token_budget=BIG)
    said = warnings_of(caplog, "repaired a broken tool-call history")
    assert len(said) == 1 and "RepairReport" not in said[0]
    assert "without a recorded result: 'call_a' (a stand-in result was sent for each)" in said[0]
    assert "answering no call before them: 'call_zz' (left out)" in said[0]


# ----- issue 33 item 4: keys amplifier-foundation's bundles carry ---------------------------------------


@pytest.mark.asyncio
async def test_the_keys_amplifier_foundations_bundles_carry_mount_without_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        ctx = await mounted(FOUNDATION_CONFIG)
    assert not caplog.records, caplog.text
    assert ctx.auto_compact is True and ctx.max_tokens == 300_000 and ctx.compact_threshold == 0.8
    without = {k: v for k, v in FOUNDATION_CONFIG.items() if k != "auto_compact"}
    assert await views_of(ctx) == await views_of(await mounted(without))  # accepted; it changes nothing


@pytest.mark.asyncio
async def test_auto_compact_false_says_it_does_not_turn_compaction_off(caplog):
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        ctx = await mounted({"auto_compact": False})
    said = warnings_of(caplog, "auto_compact=False does not turn compaction off")
    assert len(said) == 1 and ctx.auto_compact is False
    assert await views_of(ctx) == await views_of(SimpleContextManager())


# ----- issue 33 item 5: one warning per problem per session --------------------------------------------


ODD_CONFIG = {
    "compact_treshold": 0.8,  # unknown key
    "target_usage": 1.2,  # outside its range, and above the threshold
    "max_tokens": "5000",
    "preset": "evidance",
    "token_meter": "hybird",
    "summarization_prompt_path": "/no/such/prompt.md",
    "tool_result_spill_dir": "/etc/hostname/spill",
}


@pytest.mark.asyncio
async def test_amplifier_cores_validation_mount_and_the_real_mount_say_each_problem_once(caplog):
    """amplifier-core (resolver path) validates a module by mounting it on a mock coordinator, then mounts it
    for real, with the same config object: every configuration warning appeared twice. Another session
    (its own config object) is told again, as the original tells every mount (issue 37 point 1)."""
    session_config = dict(ODD_CONFIG)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        validation = await ContextValidator().validate(PACKAGE_DIR, config=session_config)
        assert validation.passed, validation.summary()
        first = len(caplog.records)
        await mounted(session_config)  # the same session's real mount
        one_session = [r.getMessage() for r in caplog.records]
        await mounted(dict(ODD_CONFIG))  # a sub-agent's session in the same process
    texts = [r.getMessage() for r in caplog.records]
    assert first >= 7 and len(one_session) == first == len(set(one_session)), one_session
    assert sorted(texts[first:]) == sorted(one_session)  # the next session hears each once more


def test_a_live_assignment_warns_the_first_time_per_distinct_value(caplog):
    ctx = SimpleContextManager()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for value in (1.5, 1.5, 1.6, 1.5):
            ctx.compact_threshold = value
    assert [len(warnings_of(caplog, f"compact_threshold={v!r} is outside")) for v in (1.5, 1.6)] == [1, 1]
    assert ctx.compact_threshold == 1.5


# ----- issue 33 item 6: a typo in a string-valued key warns instead of stopping the session -------------


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("key", "typo", "used", "closest"),
    [
        ("preset", "evidance", None, "evidence"),
        ("token_meter", "hybird", "estimate", "hybrid"),
        ("token_counter", "estimat", "estimate", "estimate"),
        ("token_counter", "tiktoken:cl100k_bas", "estimate", None),
        ("compaction_strategy", "sumary", "progressive", "summary"),
        ("summary_call_mode", "forc", "standalone", "fork"),
        ("tool_result_shape", "head-tail", "head", "head_tail"),
        ("compaction_notice_verbosity", "minimall", "normal", "minimal"),
        ("summarization_model", "", None, None),
        ("summarization_prompt_path", "", None, None),
        ("tool_result_spill_dir", "", None, None),
    ],
)
async def test_a_typo_in_a_string_valued_key_warns_once_and_the_session_runs(key, typo, used, closest, caplog):
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        ctx = await mounted({key: typo})
        views = await views_of(ctx)
    said = warnings_of(caplog, key)
    assert len(said) == 1 and getattr(ctx, key) == used and views
    if closest is not None:
        assert f"did you mean {closest!r}?" in said[0]


@pytest.mark.asyncio
async def test_a_misspelled_preset_runs_the_defaults(caplog):
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        direct = SimpleContextManager(preset="evidance")
        live = SimpleContextManager(preset="evidence")
        live.preset = "evidance"  # turns the preset off, as preset = None does
        live.preset = "evidance"  # the same value again on the same manager: said already
    said = warnings_of(caplog, "unknown preset 'evidance' (did you mean 'evidence'?)")
    assert len(said) == 2 and "running without a preset" in said[0]  # once per manager
    assert direct.preset is None and live.preset is None and live.evidence_ledger_share == 0.0
    assert await views_of(direct) == await views_of(SimpleContextManager())


# ----- issue 33 item 7: which copy of the module runs ---------------------------------------------------


@pytest.mark.asyncio
async def test_the_mount_says_which_version_runs_and_from_where(caplog):
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert package.__version__ == project["version"] != "1.0.0"  # 1.0.0 is also the original's version
    with caplog.at_level(logging.INFO, logger=LOGGER):
        await mounted({})
    said = [r.getMessage() for r in caplog.records if "mounting amplifier_module_context_simple" in r.getMessage()]
    assert len(said) == 1 and package.__version__ in said[0] and str(PACKAGE_DIR) in said[0]
    hooks = Recorder()
    ctx = SimpleContextManager(hooks=hooks)
    await ctx.add_message(user("hello"))
    await ctx.get_messages_for_request(token_budget=10_000)
    assert hooks.named("context:budget")[0]["module_version"] == package.__version__


def test_metadata_of_another_copy_is_not_taken_for_this_ones(monkeypatch, tmp_path):
    """With the original installed and this copy first on sys.path, pip's metadata names the original."""
    from amplifier_module_context_simple import version

    class Other:
        version = "1.0.0"

        def locate_file(self, name: str) -> Path:
            return tmp_path / "site-packages" / name

        def read_text(self, name: str) -> str | None:
            return None

    monkeypatch.setattr(version.metadata, "distribution", lambda name: Other())
    assert version.running_version() == version.SOURCE_VERSION


def test_the_event_names_import_without_side_effects():
    """An app may import CONTEXT_EVENTS before its session exists: nothing of amplifier-core is loaded, no
    handler, thread or file appears."""
    code = (
        "import logging, sys, threading\n"
        "from amplifier_module_context_simple import CONTEXT_EVENTS\n"
        "assert 'amplifier_core' not in sys.modules\n"
        "assert logging.getLogger('amplifier_module_context_simple').handlers == []\n"
        "assert threading.active_count() == 1\n"
        "print(len(CONTEXT_EVENTS))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(len(package.CONTEXT_EVENTS))


# ----- the tables of keys ------------------------------------------------------------------------------


def test_the_key_table_has_a_row_for_every_key_and_the_readme_states_the_rule():
    """Every key has its row in docs/configuration-checks.md's "Every key" table (the README's short table
    groups them: tests/test_docs_counts.py), and the README states the rule for numbers written as strings."""
    text = (ROOT / "docs" / "configuration-checks.md").read_text(encoding="utf-8")
    table = text[text.index("## Every key") :]
    table = table[: table.index("\n## ", 1)]
    missing = [key for key in DEFAULTS if f"| `{key}` |" not in table]
    assert missing == []
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Configuration") :]
    section = section[: section.index("\n## ", 1)]
    assert "a string that reads as a finite number" in " ".join(section.lower().split())
