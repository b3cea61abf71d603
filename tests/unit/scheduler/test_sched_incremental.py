"""The item tracking under decide()'s indexes: whatever order the items come in, an update
reports exactly the items that left and the ones that arrived."""

from collections import Counter
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from railforge.scheduler.incremental import _Held


@dataclass(frozen=True)
class Item:
    """Compares by value, like the snapshot's gangs: twins are equal but distinct objects."""

    value: int


POOL = [Item(k // 2) for k in range(40)]  # 20 pairs of twins


@st.composite
def item_sequences(draw):
    """A few successive snapshots, each of distinct items (a snapshot's gangs have unique names):
    each keeps most of the previous one in order, drops some, inserts or appends others (maybe
    the twin of one it held), and now and then moves one."""
    sequences = [draw(st.lists(st.sampled_from(POOL), unique_by=lambda item: item.value, max_size=20))]
    for _ in range(draw(st.integers(1, 4))):
        items = [item for item in sequences[-1] if draw(st.integers(0, 9))]  # about 1 in 10 leaves
        for item in draw(st.lists(st.sampled_from(POOL), unique_by=lambda item: item.value, max_size=4)):
            if item not in items:
                items.insert(draw(st.integers(0, len(items))), item)
        if items and draw(st.integers(0, 3)) == 0:
            moved = items.pop(draw(st.integers(0, len(items) - 1)))
            items.insert(draw(st.integers(0, len(items))), moved)
        sequences.append(items)
    return sequences


@settings(max_examples=300)
@given(sequences=item_sequences())
def test_update_reports_exactly_what_left_and_what_arrived(sequences):
    held = _Held()
    for items in sequences:
        before = dict(held.items)
        gone, new = held.update(tuple(items))
        # What left was held and what arrived was not: the index removes and adds exactly these.
        assert all(before.get(id(item)) is item for item in gone)
        assert not any(id(item) in before for item in new)
        assert len({id(item) for item in gone}) == len(gone) and len({id(item) for item in new}) == len(new)
        after = {key: item for key, item in before.items() if key not in {id(g) for g in gone}}
        after.update((id(item), item) for item in new)
        assert held.items == after
        # It holds the snapshot's items: each one, or an equal twin it already held.
        assert Counter(held.items.values()) == Counter(items)


def test_unchanged_and_appended_sequences():
    a, b, c, d = POOL[0], POOL[2], POOL[4], POOL[6]
    held = _Held()
    assert held.update((a, b, c)) == ([], [a, b, c])
    assert held.update((a, b, c)) == ([], [])
    assert held.update((a, c, d)) == ([b], [d])
    assert held.update((c, a)) == ([d], [])  # reordered: found by comparing sets
    assert held.items == {id(c): c, id(a): a}


def test_an_equal_twin_in_place_counts_as_the_item_held():
    a, twin, b = POOL[0], POOL[1], POOL[2]
    held = _Held()
    held.update((b, a))
    assert held.update((b, twin)) == ([], [])
    assert held.items == {id(b): b, id(a): a}
    assert held.update((twin, b)) == ([a], [twin])  # out of place: by identity


def test_a_repeated_item_is_held_once():
    a, b = POOL[0], POOL[2]
    held = _Held()
    assert held.update((a, b, a)) == ([], [a, b])
    assert held.items == {id(a): a, id(b): b}
