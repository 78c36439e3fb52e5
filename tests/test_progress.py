"""What long commands show while they run (nas.runs.progress, nas.search.progress): lines on a stream that is
not a terminal, at least one every 30 s, the time left, nothing with -q."""

import io

from nas import load_space
from nas.runs.progress import Display, Progress, duration_words
from nas.search.objective import Objective, cost_function
from nas.search.progress import SearchProgress


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_lines_per_unit_marked_and_every_30_seconds_with_the_time_left():
    stream, clock = io.StringIO(), Clock()
    progress = Progress("search 1.2 ms", total=10, unit="evaluated", display=Display(stream, clock=clock))
    progress.set_status("best in band 61.20% at 1.19 ms")
    clock.now = 10.0
    progress.advance()
    assert stream.getvalue() == ""  # neither a unit marked nor 30 s passed
    clock.now = 20.0
    progress.advance()
    progress.mark()
    assert stream.getvalue().splitlines() == [
        "search 1.2 ms: 2/10 evaluated, best in band 61.20% at 1.19 ms, about 80 s left"
    ]
    clock.now = 51.0
    progress.advance(0)  # nothing done, but 31 s passed: a line all the same
    assert stream.getvalue().splitlines()[-1].startswith("search 1.2 ms: 2/10 evaluated")
    quiet = io.StringIO()
    silent = Progress("x", total=3, enabled=False, display=Display(quiet, clock=clock))
    silent.advance()
    silent.mark()
    assert quiet.getvalue() == ""
    assert [duration_words(s) for s in (40, 720, 9000)] == ["40 s", "12 min", "2.5 h"]


def test_greedy_slimming_says_its_step_how_near_it_came_and_the_share_of_the_way():
    space = load_space("efficientformerv2-tiny")
    cost = cost_function(None, 32, 10)
    largest, smallest = space.largest(), space.smallest()
    big, small = cost(largest).params, cost(smallest).params
    target = (big + small) / 2
    objective = Objective("params", target)

    class GreedyOptions:  # no budget, no band
        pass

    stream, clock = io.StringIO(), Clock()
    progress = SearchProgress("search", objective, cost, GreedyOptions(), display=Display(stream, clock=clock))
    progress.evaluated(largest, 0.5)
    progress.batch_done()
    assert progress.fraction() == 0.0 and "step 1, nearest" in progress.status()
    assert "none meeting the target yet" in progress.status()
    clock.now = 60.0
    progress.evaluated(smallest, 0.3)  # past the target: the way is done, and it meets the target
    progress.batch_done()
    assert progress.fraction() == 1.0
    assert progress.status() == f"step 2, best meeting the target 30.00% at {small / 1e6:.2f} M parameters"
    assert stream.getvalue().splitlines()[0].startswith("search: 1 evaluated, step 1, nearest ")


def test_a_band_strategy_shows_the_best_in_its_band_of_its_budget():
    space = load_space("efficientformerv2-tiny")
    cost = cost_function(None, 32, 10)
    arch = space.largest()
    params = cost(arch).params

    class BandOptions:
        evaluations = 4
        tolerance = 0.1

    progress = SearchProgress(
        "search", Objective("params", params), cost, BandOptions(), display=Display(io.StringIO(), clock=Clock())
    )
    assert progress.status() == "none in band yet" and progress.progress.total == 4
    progress.evaluated(arch, 0.42)
    assert progress.status() == f"best in band 42.00% at {params / 1e6:.2f} M parameters"
    assert progress.progress.line().startswith("search: 1/4 evaluated, best in band 42.00%")


def test_tracked_counts_the_items_it_yields():
    from nas.runs.progress import tracked

    stream, clock = io.StringIO(), Clock()
    seen = []
    for item in tracked([1, 2, 3], "time blocks on cpu", unit="timed", display=Display(stream, 0, clock)):
        seen.append(item)
    assert seen == [1, 2, 3]
    assert stream.getvalue().splitlines()[-1] == "time blocks on cpu: 3/3 timed"
