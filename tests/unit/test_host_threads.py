"""Context switches of a threaded server are summed over its threads, not read from the main thread only."""

import os
import threading
import time

from collectors.host import thread_ctx_switches


def _status(vol: int, invol: int) -> str:
    return f"Name:\tmariadbd\nvoluntary_ctxt_switches:\t{vol}\nnonvoluntary_ctxt_switches:\t{invol}\n"


def test_sums_over_saved_task_tree(tmp_path):
    for tid, (v, i) in {"100": (5, 1), "101": (700, 30), "102": (300, 9)}.items():
        d = tmp_path / "100" / "task" / tid
        d.mkdir(parents=True)
        (d / "status").write_text(_status(v, i))
    bad = tmp_path / "100" / "task" / "103"
    bad.mkdir()
    (bad / "status").write_text("garbage")  # a thread that vanished mid-read: skipped, not fatal
    assert thread_ctx_switches(100, tmp_path) == (1005, 40)


def test_missing_process(tmp_path):
    assert thread_ctx_switches(424242, tmp_path) is None


def test_live_threads_counted():
    stop = threading.Event()

    def sleeper() -> None:
        while not stop.is_set():
            time.sleep(0.001)  # each sleep is a voluntary switch of this thread, not of the main one

    t = threading.Thread(target=sleeper)
    t.start()
    time.sleep(0.3)
    main_only = int([ln for ln in open(f"/proc/{os.getpid()}/status") if ln.startswith("voluntary")][0].split()[1])
    summed = thread_ctx_switches(os.getpid())  # while the thread lives: an ended thread's counts are gone
    stop.set()
    t.join()
    assert summed is not None and summed[0] > main_only + 50
