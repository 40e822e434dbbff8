"""Seeded planted-fact scenarios: what a context manager keeps, verbatim, and what it loses.

Constraints are stated in early user turns, facts sit in the head, middle and tail of large tool
results, and a mid-conversation correction retracts an earlier instruction. The probe: is each fact
still present, verbatim, in the request view at the probe points and at the end? Early tool results
are large (2 x tool_chars) and late ones small (tool_chars / 3), as in sessions that read whole files
first and run short commands later, so that truncation, not only removal, is exercised.
"""

from __future__ import annotations

import json
import random

from .workloads import Workload

WORDS = (
    "alpha beta gamma delta config loader parser cache index router worker queue shard replica "
    "timeout retry buffer socket thread module import export schema record field value token "
    "stream batch commit branch merge rebase patch build test deploy metric trace span log level"
).split()
CARRIER_AT = (0.1, 0.3, 0.5, 0.65, 0.75, 0.85)  # where fact-carrying tool results sit in the session
SYSTEM = (
    "You are a careful software engineering agent. Use the tools to inspect the repository, keep "
    "the user's constraints in mind at every step, and report what you changed."
)


def _code(rng: random.Random, prefix: str) -> str:
    return f"{prefix}-{rng.getrandbits(24):06X}"


def _line(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _tool_output(rng: random.Random, chars: int, head: str, mid: str, tail: str) -> str:
    """A log-like tool result of about `chars` characters with optional facts at head, middle, tail."""
    lines: list[str] = []
    while sum(len(x) + 1 for x in lines) < chars:
        lines.append(f"{len(lines):04d} {_line(rng, 9)}")
    if head:
        lines[0] = f"0000 NOTE {head}"
    if mid:
        lines[len(lines) // 2] = f"{len(lines) // 2:04d} NOTE {mid}"
    if tail:
        lines[-1] = f"{len(lines) - 1:04d} NOTE {tail}"
    return "\n".join(lines)


class _Builder:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.messages: list[dict] = [{"role": "system", "content": SYSTEM}]
        self.requests = 0
        self.calls = 0

    def user(self, text: str) -> None:
        self.messages.append({"role": "user", "content": text})

    def say(self, text: str) -> None:
        self.requests += 1
        self.messages.append({"role": "assistant", "content": text})

    def correct(self, code: str) -> int:
        """A user correction retracting the batch-pipeline instruction; returns the probe request."""
        self.user(f"Correction {code}: do NOT use the batch pipeline; use the streaming one.")
        self.say("Switching to the streaming pipeline as corrected.")
        return self.requests

    def status(self, user_words: int, reply_words: int) -> None:
        self.user(f"Status? {_line(self.rng, user_words)}")
        self.say(f"Progress: {_line(self.rng, reply_words)}")

    def finish(self, question: str, probes: list[int]) -> list[int]:
        """The closing question and answer; returns the probe requests (before and at the end)."""
        probes.append(self.requests)
        self.user(question)
        self.say("Done.")
        return sorted({*probes, self.requests})

    def tool(self, output: str) -> None:
        self.requests += 1
        self.calls += 1
        call_id = f"call_{self.calls:03d}"
        args = json.dumps({"path": f"src/{self.rng.choice(WORDS)}_{self.calls}.py"})
        call = {"id": call_id, "type": "function", "function": {"name": "read_file", "arguments": args}}
        self.messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": output})


def planted_facts(seed: int = 7, tool_results: int = 24, tool_chars: int = 2500) -> Workload:
    """Build the seeded scenario; the same seed always gives the same messages and facts."""
    rng = random.Random(seed)
    b = _Builder(rng)
    facts = {f"constraint_{i}": _code(rng, "CONSTRAINT") for i in (1, 2)}
    retracted = _code(rng, "INSTR")
    correction = _code(rng, "CORRECTION")
    b.user(f"Fix the flaky loader. Constraint {facts['constraint_1']}: never change the public API.")
    b.say("Understood. I will keep the public API unchanged.")
    b.user(
        f"Also, constraint {facts['constraint_2']}: every new function needs a test. "
        f"Instruction {retracted}: use the batch pipeline for the fix."
    )
    b.say("Noted: tests for every new function, and the batch pipeline.")
    spots = ("head", "middle", "tail", "head", "tail", "middle")
    carriers = {round(f * (tool_results - 1)): w for f, w in zip(CARRIER_AT, spots, strict=False)}
    probes: list[int] = []
    for k in range(tool_results):
        where = carriers.get(k)
        fact = _code(rng, f"FACT{k:02d}") if where else ""
        if where:
            facts[f"tool{k:02d}_{where}"] = fact
        at = {p: (fact if p == where else "") for p in ("head", "middle", "tail")}
        size = tool_chars * 2 if k < tool_results // 2 else tool_chars // 3  # big early, small late
        b.tool(_tool_output(rng, size, at["head"], at["middle"], at["tail"]))
        if k == tool_results // 2:
            facts["correction"] = correction
            probes.append(b.correct(correction))
        elif k % 3 == 2:
            b.status(40, 30)
    probes = b.finish("Final check: list every constraint and the pipeline you used.", probes)
    name = f"planted-facts-seed{seed}"
    return Workload(name, b.messages, facts, retracted, probes, source=f"generated, seed {seed}")


PLACES = ("user", "head", "middle", "end", "correction")
RESULT_SIZES = (300, 1200, 4000, 10000)  # chars: a short command, a listing, a file, a long log
RETENTION_SEEDS = 4
RETENTION_TOOL_RESULTS = 30
EARLY_USER_TURNS = 3


def fact_place(name: str) -> str:
    """Where a retention fact was planted: user, head, middle, end (of a tool result) or correction."""
    return name.split("/", 1)[0] if "/" in name else name


def retention_scenario(seed: int, tool_results: int = RETENTION_TOOL_RESULTS) -> Workload:
    """A seeded retention test: 2 facts in each early user turn, one fact per tool result at its head,
    middle or end (rotating), results of mixed sizes in random order, and a mid-session correction."""
    rng = random.Random(f"retention-{seed}")
    b = _Builder(rng)
    facts: dict[str, str] = {}
    retracted = _code(rng, "INSTR")
    for t in range(EARLY_USER_TURNS):
        a, c = _code(rng, f"REQ{t}A"), _code(rng, f"REQ{t}B")
        facts[f"user/turn{t}a"], facts[f"user/turn{t}b"] = a, c
        extra = f" Instruction {retracted}: use the batch pipeline." if t == 1 else ""
        b.user(f"Requirement {a}: {_line(rng, 12)}. Requirement {c}: {_line(rng, 10)}.{extra}")
        b.say(f"Noted. {_line(rng, 8)}.")
    probes: list[int] = []
    for k in range(tool_results):
        place = ("head", "middle", "end")[(k + seed) % 3]
        fact = _code(rng, f"F{k:02d}")
        facts[f"{place}/result{k:02d}"] = fact
        spots = {p: (fact if p == place else "") for p in ("head", "middle", "end")}
        b.tool(_tool_output(rng, rng.choice(RESULT_SIZES), spots["head"], spots["middle"], spots["end"]))
        if k == tool_results // 2:
            facts["correction"] = _code(rng, "CORRECTION")
            probes.append(b.correct(facts["correction"]))
        elif k % 4 == 3:
            b.status(30, 25)
    probes = b.finish("Final check: list every requirement, every NOTE you saw, and the pipeline you used.", probes)
    name = f"retention-seed{seed}"
    return Workload(name, b.messages, facts, retracted, probes, source=f"generated, seed {seed}")


def retention_scenarios(first_seed: int = 7, seeds: int = RETENTION_SEEDS) -> list[Workload]:
    """The retention test: `seeds` scenarios with consecutive seeds."""
    return [retention_scenario(first_seed + i) for i in range(seeds)]


CORRECTIONS = 4  # mid-session corrections per corrections scenario
_SETTINGS = ("port", "region", "log level", "retry limit", "batch size", "timeout")


def correction_text(rng: random.Random, n: int) -> str:
    """A user's mid-session correction, long enough (> 80 characters) that the ladder may stub it."""
    setting = _SETTINGS[(n + rng.randrange(len(_SETTINGS))) % len(_SETTINGS)]
    new, old = rng.randrange(1000, 9999), rng.randrange(1000, 9999)
    return (
        f"Actually, use {setting} {new}, not {old}: the old value clashes with {_code(rng, 'SVC')} "
        f"({_line(rng, 6)}). Keep this for the rest of the session."
    )


def correction_scenario(seed: int, tool_results: int = RETENTION_TOOL_RESULTS) -> Workload:
    """A seeded session with `CORRECTIONS` user corrections spread over its middle (issue 23): the probe
    is whether each is still in the view, verbatim, as the user typed it, at the end."""
    rng = random.Random(f"corrections-{seed}")
    b = _Builder(rng)
    b.user(f"Set up the service and keep it running. {_line(rng, 14)}.")
    b.say(f"Noted. {_line(rng, 8)}.")
    at = {round(tool_results * (i + 1) / (CORRECTIONS + 1)) for i in range(CORRECTIONS)}
    corrections: list[str] = []
    for k in range(tool_results):
        b.tool(_tool_output(rng, rng.choice(RESULT_SIZES), "", "", ""))
        if k in at:
            corrections.append(correction_text(rng, len(corrections)))
            b.user(corrections[-1])
            b.say("Understood, switching to the corrected value.")
        elif k % 4 == 3:
            b.status(30, 25)
    b.finish("Final check: list every value you were told to use.", [])
    name = f"corrections-seed{seed}"
    return Workload(name, b.messages, source=f"generated, seed {seed}", corrections=corrections)


def generated_scenarios(first_seed: int = 7) -> list[Workload]:
    """Every generated scenario of a run: the retention scenarios, then the corrections scenarios."""
    return retention_scenarios(first_seed) + correction_scenarios(first_seed)


def correction_scenarios(first_seed: int = 7, seeds: int = RETENTION_SEEDS) -> list[Workload]:
    """The corrections probe: `seeds` sessions with consecutive seeds, 4 corrections each."""
    return [correction_scenario(first_seed + i) for i in range(seeds)]
