"""The identity tracking under decide()'s indexes: whatever order the items come in, an update
reports exactly the items that left and the ones that arrived."""

from hypothesis import given, settings
from hypothesis import strategies as st

from railforge.scheduler.incremental import _Held

POOL = [object() for _ in range(40)]  # distinct objects, told apart by identity only


@st.composite
def item_sequences(draw):
    """A few successive snapshots: each keeps most of the previous one in order, drops some,
    inserts or appends others, and now and then moves or repeats one."""
    sequences = [draw(st.lists(st.sampled_from(POOL), unique_by=id, max_size=30))]
    for _ in range(draw(st.integers(1, 4))):
        items = [item for item in sequences[-1] if draw(st.integers(0, 9))]  # about 1 in 10 leaves
        for item in draw(st.lists(st.sampled_from(POOL), unique_by=id, max_size=4)):
            if all(kept is not item for kept in items):
                items.insert(draw(st.integers(0, len(items))), item)
        if items and draw(st.integers(0, 3)) == 0:
            moved = items.pop(draw(st.integers(0, len(items) - 1)))
            items.insert(draw(st.integers(0, len(items))), moved)
        if items and draw(st.integers(0, 5)) == 0:
            items.append(items[draw(st.integers(0, len(items) - 1))])
        sequences.append(items)
    return sequences


@settings(max_examples=300)
@given(sequences=item_sequences())
def test_update_reports_exactly_what_left_and_what_arrived(sequences):
    held = _Held()
    before: dict[int, object] = {}
    for items in sequences:
        gone, new = held.update(tuple(items))
        now = {id(item): item for item in items}
        assert sorted(map(id, gone)) == sorted(before.keys() - now.keys())
        assert sorted(map(id, new)) == sorted(now.keys() - before.keys())
        assert held.items == now
        before = now


def test_unchanged_and_appended_sequences():
    a, b, c, d = POOL[:4]
    held = _Held()
    assert held.update((a, b, c)) == ([], [a, b, c])
    assert held.update((a, b, c)) == ([], [])
    assert held.update((a, c, d)) == ([b], [d])
    assert held.update((c, a)) == ([d], [])  # reordered: found by comparing sets
    assert held.items == {id(c): c, id(a): a}
