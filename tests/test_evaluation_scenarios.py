"""The retention scenarios: 100+ facts, planted where they say, in results of mixed sizes."""

from collections import Counter

from evaluation.scenarios import RESULT_SIZES, fact_place, retention_scenario, retention_scenarios


def test_four_seeds_plant_148_facts_by_place():
    loads = retention_scenarios(7)
    assert [w.name for w in loads] == [f"retention-seed{s}" for s in (7, 8, 9, 10)]
    places = Counter(fact_place(name) for w in loads for name in w.facts)
    assert places == {"user": 24, "head": 40, "middle": 40, "end": 40, "correction": 4}
    assert len({code for w in loads for code in w.facts.values()}) == 148  # every fact is distinct


def test_each_fact_sits_where_its_name_says():
    w = retention_scenario(7)
    users = [m["content"] for m in w.messages if m["role"] == "user"]
    results = {m["tool_call_id"]: m["content"] for m in w.messages if m["role"] == "tool"}
    ordered = [results[k] for k in sorted(results)]
    for name, code in w.facts.items():
        place = fact_place(name)
        if place == "user":
            assert any(code in u for u in users[:3]), name  # an early user turn
        elif place == "correction":
            assert not any(code in u for u in users[:3]) and any(code in u for u in users[3:])
        else:
            lines = ordered[int(name[-2:])].splitlines()
            index = {"head": 0, "middle": len(lines) // 2, "end": len(lines) - 1}[place]
            assert code in lines[index], (name, place)


def test_results_come_in_mixed_sizes_and_the_same_seed_gives_the_same_session():
    w = retention_scenario(8)
    sizes = [len(m["content"]) for m in w.messages if m["role"] == "tool"]
    assert len(sizes) == 30
    assert all(any(abs(n - s) < 200 for s in RESULT_SIZES) for n in sizes)
    assert len({min(RESULT_SIZES, key=lambda s, n=n: abs(n - s)) for n in sizes}) == len(RESULT_SIZES)
    assert retention_scenario(8).messages == w.messages
    assert retention_scenario(9).messages != w.messages
