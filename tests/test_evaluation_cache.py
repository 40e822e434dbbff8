"""The prefix-cache model on hand-made request sequences with known answers."""

from evaluation.cache import CacheOutcome, PrefixCache, Prices


def test_pure_append_reads_the_previous_prefix_and_writes_the_rest():
    cache = PrefixCache()
    first = cache.request(["a", "b"], [600, 600], cacheable=2)
    assert first == CacheOutcome(total=1200, read=0, write=1200, plain=0, waste=0, read_messages=0)
    second = cache.request(["a", "b", "c"], [600, 600, 300], cacheable=3)
    assert (second.read, second.write, second.plain, second.waste) == (1200, 300, 0, 0)
    third = cache.request(["a", "b", "c", "d"], [600, 600, 300, 50], cacheable=4)
    assert (third.read, third.write, third.read_messages) == (1500, 50, 3)


def test_change_at_position_k_falls_back_to_an_earlier_written_prefix():
    cache = PrefixCache()
    cache.request(["a", "b"], [600, 600], cacheable=2)  # writes [a, b]
    cache.request(["a", "b", "c", "d"], [600, 600, 300, 300], cacheable=4)  # writes [a, b, c, d]
    changed = cache.request(["a", "b", "c", "Y"], [600, 600, 300, 400], cacheable=4)
    # [a, b, c] was never a written prefix; [a, b] was.
    assert (changed.read, changed.write, changed.plain) == (1200, 700, 0)
    assert changed.waste == 300  # c had been cached and is billed again


def test_change_at_position_one_reads_nothing_and_counts_waste():
    cache = PrefixCache()
    cache.request(["a", "b", "c"], [600, 600, 300], cacheable=3)
    changed = cache.request(["a", "X", "c"], [600, 600, 300], cacheable=3)
    assert (changed.read, changed.write, changed.plain) == (0, 1500, 0)
    assert changed.waste == 900  # a and c were cached before


def test_ephemeral_tail_is_plain_input_and_never_cached():
    cache = PrefixCache()
    first = cache.request(["a", "b", "notice"], [600, 600, 100], cacheable=2)
    assert (first.read, first.write, first.plain) == (0, 1200, 100)
    second = cache.request(["a", "b", "c", "notice"], [600, 600, 200, 100], cacheable=3)
    assert (second.read, second.write, second.plain, second.waste) == (1200, 200, 100, 0)
    assert second.gross_input == 1300  # plain + read, as providers report input_tokens


def test_prefixes_under_the_minimum_are_neither_written_nor_read():
    cache = PrefixCache()
    assert cache.request(["a"], [500], 1).plain == 500
    under = cache.request(["a", "b"], [500, 400], 2)
    assert (under.read, under.write, under.plain) == (0, 0, 900)
    over = cache.request(["a", "b", "c"], [500, 400, 200], 3)
    assert (over.read, over.write, over.plain) == (0, 1100, 0)
    after = cache.request(["a", "b", "c", "d"], [500, 400, 200, 10], 4)
    assert (after.read, after.write) == (1100, 10)


def test_cost_uses_the_configured_prices():
    outcome = CacheOutcome(total=1000, read=500, write=300, plain=200, waste=0, read_messages=1)
    assert outcome.cost(Prices()) == 200 * 1.0 + 300 * 1.25 + 500 * 0.1
    assert outcome.cost(Prices(input=2.0, cache_write=3.0, cache_read=0.5)) == 400 + 900 + 250
