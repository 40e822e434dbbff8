"""Every count the README and docs state is the code's count (issue 31 point 8: "six of its own" beside "the
four events outside ALL_EVENTS" and "all five"; "4 retention scenarios" where the run has 8 generated ones).

Each claim is a pattern around a number (digits or a word) and the code's count it must equal; the lists the
docs give in full (events, configuration keys, fault_stats keys, stats keys) must be the code's lists."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from amplifier_module_context_simple import CONTEXT_EVENTS, OBSERVABLE_EVENTS, PRESETS, SimpleContextManager
from amplifier_module_context_simple.config import DEFAULTS
from amplifier_module_context_simple.manager import FAULT_KEYS
from evaluation.arms import ARMS
from evaluation.report import COLUMNS
from evaluation.scenarios import CORRECTIONS, correction_scenarios, generated_scenarios, retention_scenarios

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
WORDS = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen"
NUMBER_WORDS = {word: n for n, word in enumerate(WORDS.split())} | {"twenty": 20, "twenty-one": 21, "twenty-six": 26}
NUM = r"(\d[\d,]*|" + "|".join(sorted(NUMBER_WORDS, key=len, reverse=True)) + ")"


def number(text: str) -> int:
    text = text.lower()
    return NUMBER_WORDS[text] if text in NUMBER_WORDS else int(text.replace(",", ""))


def prose(page: Path) -> str:
    """A page without its fenced code blocks, inline code unwrapped, lines joined (a claim may wrap)."""
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    return re.sub(r"\s+", " ", text.replace("`", ""))


def workloads(folder: str) -> int:
    return len(list((ROOT / folder).glob("*.jsonl")))


def golden_views() -> int:
    import json

    return len(json.loads((ROOT / "tests/data/golden_views.json").read_text(encoding="utf-8"))["hashes"])


TRUE: dict[str, Callable[[], int]] = {
    "own events": lambda: len(OBSERVABLE_EVENTS),
    "all events": lambda: len(CONTEXT_EVENTS),
    "presets": lambda: len(PRESETS),
    "configurations": lambda: len(ARMS),
    "retention scenarios": lambda: len(retention_scenarios()),
    "corrections scenarios": lambda: len(correction_scenarios()),
    "generated scenarios": lambda: len(generated_scenarios()),
    "corrections per session": lambda: CORRECTIONS,
    "corrections in all": lambda: sum(len(w.corrections) for w in correction_scenarios()),
    "planted facts": lambda: sum(len(w.facts) for w in retention_scenarios()),
    "facts per session": lambda: len(retention_scenarios()[0].facts),
    "report columns": lambda: len(COLUMNS),
    "configuration keys": lambda: len(DEFAULTS),
    "fault_stats keys": lambda: len(FAULT_KEYS),
    "golden views": golden_views,
}
# (pattern with one number group, what it counts); matched case-insensitively on every page's prose.
CLAIMS: list[tuple[str, str]] = [
    (rf"\b{NUM} (?:events? )?of its own", "own events"),
    (rf"\b{NUM} (?:of )?(?:the module's |its )?own events", "own events"),
    (rf"\b{NUM} events outside", "own events"),
    (rf"OBSERVABLE_EVENTS \((?:the|all) {NUM}\)", "own events"),
    (rf"CONTEXT_EVENTS \((?:the|all) {NUM}\)", "all events"),
    (rf"CONTEXT_EVENTS lists (?:all )?{NUM}\b", "all events"),
    (rf"\b{NUM} (?:shipped |named )?presets", "presets"),
    (rf"\b{NUM} (?:arms|configurations)\b(?! interleaved)", "configurations"),
    (rf"\b{NUM} (?:retention|planted-fact|seeded planted-fact) scenarios", "retention scenarios"),
    (rf"\b{NUM} corrections scenarios", "corrections scenarios"),
    (rf"\b{NUM} generated (?:scenarios|sessions)", "generated scenarios"),
    (rf"transcripts? (?:\+|and|plus) {NUM} (?:\w+ )?(?:scenarios|sessions)", "generated scenarios"),
    (rf"\b{NUM} (?:long )?corrections (?:per session|each)", "corrections per session"),
    (rf"\b{NUM} (?:long )?corrections (?:in all|a user made)", "corrections in all"),
    (rf"\bof {NUM} (?:of the user's )?(?:long )?corrections", "corrections in all"),
    (rf"\b{NUM} (?:facts planted|planted facts)(?! each)", "planted facts"),
    (rf"\b{NUM} (?:planted )?facts each", "facts per session"),
    (rf"\ball {NUM} columns", "report columns"),
    (rf"\b{NUM} (?:configuration |config )?keys\b", "configuration keys"),
    (rf"\b{NUM} fault_stats keys", "fault_stats keys"),
    (rf"\bof the {NUM} golden (?:default )?views", "golden views"),
]


def stated_counts(pages: list[Path] = PAGES) -> list[tuple[str, str, str, int]]:
    """(page, the words as written, what they count, the number stated) for every claim found."""
    found = []
    for page in pages:
        text = prose(page)
        for pattern, what in CLAIMS:
            for match in re.finditer(pattern, text, flags=re.IGNORECASE):
                found.append((page.name, match.group(0), what, number(match.group(1))))
    return found


def test_every_count_the_docs_state_is_the_codes():
    wrong = [
        f"{page}: {words!r} states {stated}, the code has {TRUE[what]()} ({what})"
        for page, words, what, stated in stated_counts()
        if stated != TRUE[what]()
    ]
    assert wrong == []


def test_the_scanner_finds_the_counts_the_docs_state():
    """A pattern that stopped matching would pass silently: the counts known to be stated are found."""
    kinds = {what for _, _, what, _ in stated_counts()}
    assert {"generated scenarios", "retention scenarios", "corrections in all", "planted facts"} <= kinds
    assert {"facts per session", "report columns", "golden views"} <= kinds


@pytest.mark.parametrize(
    ("text", "what", "stated"),
    [
        ("The four events outside amplifier-core's ALL_EVENTS", "own events", 4),
        ("OBSERVABLE_EVENTS (the four) and CONTEXT_EVENTS (all five)", "all events", 5),
        ("(14 arms, 6 shipped transcripts + 4 retention scenarios, 140 runs)", "generated scenarios", 4),
    ],
)
def test_the_old_wrong_counts_would_be_caught(text, what, stated, tmp_path):
    page = tmp_path / "page.md"
    page.write_text(text, encoding="utf-8")
    claims = [(w, s) for _, _, w, s in stated_counts([page])]
    assert (what, stated) in claims and stated != TRUE[what]()


def test_every_count_of_transcripts_is_one_of_the_shipped_sets():
    """Two sets are shipped (the evaluation's and the tests'), and --split halves the tests' set."""
    sets = {
        workloads("evaluation/workloads"),
        workloads("tests/data/workloads"),
        workloads("tests/data/workloads") // 2,
    }
    pattern = rf"\b(?:all|the|on|over) {NUM} (?:shipped )?(?:real )?transcripts\b"
    stated = [
        (page.name, m.group(0), number(m.group(1))) for page in PAGES for m in re.finditer(pattern, prose(page), re.I)
    ]
    assert len(stated) > 10
    assert [(page, words) for page, words, n in stated if n not in sets] == []


def backticked(text: str) -> set[str]:
    return set(re.findall(r"`([^`\s]+)`", text))


def section(page: str, heading: str) -> str:
    """The text of a page from a heading to the next heading of the same or a higher level."""
    text = (ROOT / page).read_text(encoding="utf-8")
    level = heading.split(" ")[0]
    start = text.index(heading + "\n")
    rest = text[start + len(heading) :]
    end = re.search(rf"^#{{1,{len(level)}}} ", rest, flags=re.MULTILINE)
    return rest[: end.start()] if end else rest


def test_the_readme_names_every_event_and_no_other():
    events = {word for word in backticked(section("README.md", "### Events")) if word.startswith("context:")}
    assert events == set(CONTEXT_EVENTS)
    for page in PAGES:
        named = set(re.findall(r"\bcontext:[a-z_-]+[a-z]", page.read_text(encoding="utf-8")))
        assert named <= set(CONTEXT_EVENTS), f"{page.name} names events the module does not emit"


def test_the_reference_events_table_and_contribution_list_are_the_codes():
    text = section("docs/reference.md", "## Events")
    rows = re.findall(r"^\| `(context:[^`]+)` \|", text, flags=re.MULTILINE)
    assert sorted(rows) == sorted(CONTEXT_EVENTS)
    contributed = re.search(r"returns\s+`(\[\[.*?\]\])`", text, flags=re.DOTALL).group(1)
    assert re.findall(r'"(context:[^"]+)"', contributed) == list(OBSERVABLE_EVENTS)


def documented_keys(page: str, heading: str) -> list[str]:
    return re.findall(r"^\| `([a-z_]+)` \|", section(page, heading), flags=re.MULTILINE)


def test_every_configuration_key_is_documented_once_in_each_table():
    full = documented_keys("docs/configuration-checks.md", "## Every key")
    assert sorted(full) == sorted(DEFAULTS)
    readme = section("README.md", "## Configuration")
    rows = [line for line in readme.splitlines() if line.startswith("| `")]
    in_readme = [key for line in rows for key in re.findall(r"`([a-z_]+)`", line.split(" | ")[0])]
    summary_keys = {k for k in DEFAULTS if k.startswith(("summary_", "summarization_"))}
    assert "`summary_*`" in readme and "`summarization_*`" in readme
    assert sorted(in_readme) == sorted(set(DEFAULTS) - summary_keys)


def test_the_fault_stats_keys_listed_are_the_codes():
    text = section("docs/reference.md", "## Stats")
    paragraph = text[text.index("`fault_stats` (a property)") :].split("\n\n")[0]
    named = re.findall(r"`([a-z_]+)`", paragraph)
    listed = [key for key in named if not hasattr(SimpleContextManager, key)]  # not fault_stats, restore_state
    assert listed == list(FAULT_KEYS)
    assert set(SimpleContextManager().fault_stats) == set(FAULT_KEYS)


async def compacted(**config) -> SimpleContextManager:
    context = SimpleContextManager(max_tokens=3_000, **config)
    await context.add_message({"role": "system", "content": "You are a coding agent."})
    await context.add_message({"role": "user", "content": "Fix the failing test in src/app.py."})
    for i in range(12):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "ls"}'}}
        await context.add_message({"role": "assistant", "content": "", "tool_calls": [call]})
        await context.add_message({"role": "tool", "tool_call_id": f"c{i}", "content": f"src/mod_{i}.py\n" * 80})
    await context.add_message({"role": "user", "content": "And now?"})
    await context.get_messages_for_request()
    return context


@pytest.mark.asyncio
@pytest.mark.parametrize("preset", [None, "evidence"])
async def test_every_stats_key_the_module_reports_is_documented(preset):
    context = await compacted(preset=preset)
    documented = backticked(section("docs/reference.md", "## Stats"))
    documented |= backticked(section("docs/evidence-compaction.md", "## What it does"))
    compaction = set(context._last_compaction_stats)
    meter = set(context._last_token_meter_stats)
    assert compaction and meter
    assert compaction - documented == set()
    assert meter - documented == set()
