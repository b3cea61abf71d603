"""The exact placement search's documented reach (docs/scheduler-core.md, *Placement*): on random
instances of up to 8 pods in up to 3 shapes over up to 64 distinct node free states, every search
finishes within its budget, so a miss there is a proof. The instances are those
``benchmarks/bench_exact_search.py`` measures (which shows where the reach ends)."""

import random
import sys
from pathlib import Path

import pytest

from railforge.scheduler import GPU
from railforge.scheduler.placement import ExactSearch

sys.path.insert(0, str(Path(__file__).parents[3] / "benchmarks"))
from bench_exact_search import instance, measure


@pytest.mark.parametrize("states", [8, 16, 32, 64])
@pytest.mark.parametrize("shapes", [2, 3])
def test_the_search_finishes_within_its_budget_up_to_the_documented_size(states, shapes):
    for pods in (4, 8):
        out_of_budget, placed, _, _, _ = measure(states, shapes, pods, instances=100)
        assert out_of_budget == 0, f"{states} free states, {shapes} shapes, {pods} pods"
        assert placed > 0 or states == 8  # the sample holds instances that fit, not only refutations


def test_what_the_search_places_fits_the_nodes_it_names():
    rng = random.Random(5)
    checked = 0
    for _ in range(200):
        shapes, rooms = instance(rng, 32, 3, 8)
        found = ExactSearch(shapes, rooms).run()
        if found is None:
            continue
        checked += 1
        requests = {name: {GPU: shape.gpu, **dict(shape.others)} for shape in shapes for name in shape.member_names}
        assert sorted(name for name, _ in found) == sorted(requests)
        for index, room in rooms.items():
            for resource, free in room.items():
                assert sum(requests[name][resource] for name, node in found if node == index) <= free
    assert checked > 50
