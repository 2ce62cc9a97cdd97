"""core/shared.py against the real Redis of the suite: a value is computed once per window
for every caller, one caller computes while the others read the last value, and a value that
is not of the entry's shape (planted, or from an older release) reads as a miss."""

import threading
import time
import uuid

import pytest
from django.core.cache import cache

from core.shared import shared_value


@pytest.fixture
def key():
    name = f"test-shared:{uuid.uuid4().hex}"
    yield name
    cache.delete_many([name, f"{name}:computing"])


class Counter:
    def __init__(self, pause: threading.Event | None = None):
        self.calls = 0
        self.pause = pause

    def __call__(self) -> dict:
        self.calls += 1
        if self.pause is not None:
            self.pause.wait(10)
        return {"n": self.calls}


def test_callers_within_the_window_share_one_computation(key):
    compute = Counter()
    answers = [shared_value(key, compute, fresh_s=60) for _ in range(5)]
    assert compute.calls == 1
    assert answers == [{"n": 1}] * 5


def test_a_stale_value_is_computed_again_by_the_next_caller(key):
    compute = Counter()
    assert shared_value(key, compute, fresh_s=60) == {"n": 1}
    assert shared_value(key, compute, fresh_s=0) == {"n": 2}  # a window of 0: always stale
    assert shared_value(key, compute, fresh_s=60) == {"n": 2}


def test_others_read_the_last_value_while_one_caller_computes(key):
    assert shared_value(key, Counter(), fresh_s=60) == {"n": 1}
    release = threading.Event()
    slow = Counter(pause=release)
    slow.calls = 1
    answers = []
    computer = threading.Thread(target=lambda: answers.append(shared_value(key, slow, fresh_s=0)))
    computer.start()
    while not cache.get(f"{key}:computing"):
        time.sleep(0.01)  # the lock is taken: the computation runs
    others = Counter()
    assert shared_value(key, others, fresh_s=0) == {"n": 1}  # the last value, not a new one
    assert others.calls == 0
    release.set()
    computer.join(10)
    assert answers == [{"n": 2}] and slow.calls == 2
    assert shared_value(key, others, fresh_s=60) == {"n": 2}


def test_without_any_value_the_others_wait_for_the_one_computing(key):
    release = threading.Event()
    slow = Counter(pause=release)
    answers = []
    threads = [
        threading.Thread(target=lambda: answers.append(shared_value(key, slow, fresh_s=60)))
        for _ in range(4)
    ]
    threads[0].start()
    while not cache.get(f"{key}:computing"):
        time.sleep(0.01)
    for thread in threads[1:]:
        thread.start()
    release.set()
    for thread in threads:
        thread.join(10)
    assert slow.calls == 1
    assert answers == [{"n": 1}] * 4


def test_a_value_not_of_the_entrys_shape_is_a_miss(key):
    cache.set(key, {"checks": "from an older release"}, 60)
    compute = Counter()
    assert shared_value(key, compute, fresh_s=60) == {"n": 1}
    assert cache.get(key)["value"] == {"n": 1}
