"""Process rows and trees read straight from /proc give what psutil gives, on live processes and saved trees."""

import os
import subprocess
import sys
import time

import psutil
import pytest

from collectors.procfs import CLK_TCK, PAGE_BYTES, ProcReader, stat_fields, status_ctx

STAT = "{pid} (post gres: a) b) S {ppid} 1 1 0 -1 4194560 100 0 0 0 {ut} {st} {cut} {cst} 20 0 {nt} 0 {start} 1000 2 0"
STATUS = "Name:\tx\nThreads:\t{nt}\nvoluntary_ctxt_switches:\t{v}\nnonvoluntary_ctxt_switches:\t{i}\n"


def _psutil_row(pid: int) -> list[float]:
    p = psutil.Process(pid)
    with p.oneshot():
        ct, cs, mem, io = p.cpu_times(), p.num_ctx_switches(), p.memory_info(), p.io_counters()
        return [round(ct.user, 3), round(ct.system, 3), cs.voluntary, cs.involuntary, mem.rss, io.read_bytes,
                io.write_bytes, round(p.create_time(), 3), round(ct.children_user, 3), round(ct.children_system, 3),
                p.ppid()]


def test_live_tree_and_rows_match_psutil():
    # A parent with two sleeping children: their counters do not move while both libraries read them.
    code = "import subprocess, time; ps = [subprocess.Popen(['sleep', '30']) for _ in range(2)]; time.sleep(30)"
    parent = subprocess.Popen([sys.executable, "-c", code])
    try:
        p = psutil.Process(parent.pid)
        for _ in range(200):
            if len(p.children()) == 2 and all(c.status() == psutil.STATUS_SLEEPING for c in p.children()):
                break
            time.sleep(0.05)
        kids = sorted(c.pid for c in p.children(recursive=True))
        assert len(kids) == 2
        r = ProcReader()
        assert sorted(r.tree(parent.pid)) == sorted([parent.pid, *kids])
        for pid in kids:
            row = r.row(pid)
            assert row is not None and row[:11] == _psutil_row(pid)
            # The run-queue wait: the kernel's own schedstat (a sleeping process's does not move).
            with open(f"/proc/{pid}/schedstat") as f:
                assert row[11] == int(f.read().split()[1]) / 1e9
        mine = r.row(os.getpid())
        assert mine is not None and mine[7] == round(psutil.Process().create_time(), 3)
    finally:
        for c in psutil.Process(parent.pid).children(recursive=True):
            c.kill()
        parent.kill()
        parent.wait()
    assert ProcReader().row(parent.pid) is None and ProcReader().tree(parent.pid) == []


def _proc(root, pid, ppid, threads=1, children=None, reaped=(0, 0)):
    d = root / str(pid)
    (d / "task" / str(pid)).mkdir(parents=True)
    (d / "stat").write_text(STAT.format(pid=pid, ppid=ppid, ut=250, st=50, cut=reaped[0], cst=reaped[1], nt=threads,
                                        start=1000) + "\n")
    (d / "status").write_text(STATUS.format(nt=threads, v=7, i=3))
    (d / "statm").write_text("1000 300 100 1 0 200 0\n")
    (d / "io").write_text("rchar: 1\nwchar: 2\nread_bytes: 4096\nwrite_bytes: 8192\ncancelled_write_bytes: 99\n")
    if children is not None:
        (d / "task" / str(pid) / "children").write_text(" ".join(map(str, children)) + " ")
    return d


def test_saved_tree_with_child_lists(tmp_path):
    (tmp_path / "stat").write_text("cpu 1 2 3\nbtime 1700000000\n")
    (tmp_path / "self" / "task" / "1").mkdir(parents=True)
    (tmp_path / "self" / "task" / "1" / "children").write_text("")
    _proc(tmp_path, 10, 1, children=[11, 12])
    _proc(tmp_path, 11, 10, children=[13])
    _proc(tmp_path, 12, 10, children=[])
    _proc(tmp_path, 13, 11, children=[])
    r = ProcReader(tmp_path)
    assert r.tree(10) == [10, 11, 12, 13]
    assert r.row(12) == [round(250 / CLK_TCK, 3), round(50 / CLK_TCK, 3), 7, 3, 300 * PAGE_BYTES, 4096, 8192,
                         round(1700000000 + 1000 / CLK_TCK, 3), 0.0, 0.0, 10, -1.0]  # -1: no schedstat file


def test_cpu_of_reaped_children_counts_in_the_parent(tmp_path):
    """stat's cutime/cstime (ticks of children the process waited for) are the row's reaped seconds."""
    (tmp_path / "stat").write_text("btime 1700000000\n")
    _proc(tmp_path, 50, 1, reaped=(40, 10))
    row = ProcReader(tmp_path).row(50)
    assert row is not None and row[8:11] == [round(40 / CLK_TCK, 3), round(10 / CLK_TCK, 3), 1]


def test_run_queue_wait_is_summed_over_a_threaded_process(tmp_path):
    """A threaded server (mysqld): /proc/PID/schedstat is the main thread's; the row sums every thread's."""
    (tmp_path / "stat").write_text("btime 1700000000\n")
    d = _proc(tmp_path, 60, 1, threads=3)
    (d / "schedstat").write_text("5 1000 1\n")
    for tid, delay in ((60, 1000), (61, 2_000_000), (62, 3_000_000_000)):
        (d / "task" / str(tid)).mkdir(exist_ok=True)
        (d / "task" / str(tid) / "schedstat").write_text(f"5 {delay} 9\n")
        (d / "task" / str(tid) / "status").write_text(STATUS.format(nt=3, v=1, i=1))
    row = ProcReader(tmp_path).row(60)
    assert row is not None and row[11] == pytest.approx(3.002001)
    d1 = _proc(tmp_path, 70, 1)
    (d1 / "schedstat").write_text("5 2500000 1\n")
    assert ProcReader(tmp_path).row(70)[11] == pytest.approx(0.0025)


def test_a_child_that_exits_between_samples_keeps_its_cpu_in_the_group():
    """A live parent's tree sampled before and after a CPU-burning child exits: the group's CPU increase
    (reports.model.series.group_deltas, the host series' arithmetic) covers the child's whole run, though the
    second sample no longer sees the child, and counts it once."""
    from reports.model.series import group_deltas
    code = ("import os, sys, time\n"
            "print('ready', flush=True)\n"
            "sys.stdin.readline()\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    t = time.process_time()\n"
            "    while time.process_time() - t < 0.4: pass\n"
            "    os._exit(0)\n"
            "os.waitpid(pid, 0)\n"
            "print('reaped', flush=True)\n"
            "sys.stdin.readline()\n")
    parent = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        r = ProcReader()
        assert parent.stdout.readline().strip() == "ready"  # its start-up CPU is behind the first sample
        before = {str(p): r.row(p) for p in r.tree(parent.pid)}
        t_before = time.time()
        parent.stdin.write("go\n")
        parent.stdin.flush()
        assert parent.stdout.readline().strip() == "reaped"
        r.begin()
        after = {str(p): r.row(p) for p in r.tree(parent.pid)}
        assert list(after) == [str(parent.pid)]
        cpu = group_deltas(before, after, t_before)
        assert 0.35 <= cpu[0] + cpu[1] <= 0.55, cpu
    finally:
        parent.kill()
        parent.wait()


def test_saved_tree_without_child_lists_scans_parents_once_per_sample(tmp_path):
    (tmp_path / "stat").write_text("btime 1700000000\n")
    for pid, ppid in ((10, 1), (11, 10), (12, 11), (20, 1)):
        _proc(tmp_path, pid, ppid)
    r = ProcReader(tmp_path)
    assert r.tree(10) == [10, 11, 12] and r.tree(20) == [20]
    _proc(tmp_path, 14, 10)
    assert r.tree(10) == [10, 11, 12]   # the same sample: the scan is reused
    r.begin()
    assert sorted(r.tree(10)) == [10, 11, 12, 14]


def test_threaded_process_sums_its_threads(tmp_path):
    d = _proc(tmp_path, 30, 1, threads=3)
    for tid, (v, i) in {"30": (1, 1), "31": (100, 10), "32": (50, 5)}.items():
        (d / "task" / tid).mkdir(exist_ok=True)
        (d / "task" / tid / "status").write_text(STATUS.format(nt=3, v=v, i=i))
    row = ProcReader(tmp_path).row(30)
    assert row is not None and row[2:4] == [151, 16]


def test_odd_files_give_none_not_a_traceback(tmp_path):
    d = _proc(tmp_path, 40, 1)
    r = ProcReader(tmp_path)
    for name, text in (("stat", "garbage"), ("stat", "40 (x) S 1 2"), ("statm", ""),
                       ("status", "voluntary_ctxt_switches:\tmany\nnonvoluntary_ctxt_switches:\t1\n")):
        good = (d / name).read_text()
        (d / name).write_text(text)
        assert r.row(40) is None, name
        (d / name).write_text(good)
    (d / "io").unlink()  # another user's process: storage bytes unreadable, the rest stands
    assert r.row(40)[5:7] == [0, 0]
    assert stat_fields("1 (a) b) c) S 1") is None and status_ctx("Name:\tx\n") is None
    assert status_ctx("nonvoluntary_ctxt_switches:\t5\nvoluntary_ctxt_switches:\t9\n") == (9, 5)


def test_resident_bytes_from_status_without_statm(tmp_path):
    """VmRSS (KiB) is statm's resident count: the row reads it from status and needs no statm."""
    (tmp_path / "stat").write_text("btime 1700000000\n")
    d = _proc(tmp_path, 50, 1)
    (d / "status").write_text(STATUS.format(nt=1, v=7, i=3) + "VmRSS:\t    1200 kB\n")
    (d / "statm").unlink()
    assert ProcReader(tmp_path).row(50)[4] == 1200 * 1024
