"""reports.model.series.group_deltas: a group's CPU per interval from per-PID rows, with exited children found in
the reaped seconds of their parent (collectors.procfs rows: ..., create_time, reaped_user_s, reaped_system_s,
ppid) and counted once."""

from reports.model.series import group_deltas


def row(user: float, system: float, born: float, reaped_user: float = 0.0, reaped_system: float = 0.0,
        ppid: int = 1) -> list[float]:
    return [user, system, 0, 0, 1000, 0, 0, born, reaped_user, reaped_system, ppid]


def cpu(prev: dict[str, list[float]], cur: dict[str, list[float]], prev_t: float = 100.0) -> tuple[float, float]:
    d = group_deltas(prev, cur, prev_t)
    return round(d[0], 6), round(d[1], 6)


def test_a_child_seen_before_and_reaped_since_adds_only_its_last_interval():
    # the child ran 3.0 + 1.0 s before the first sample and 0.5 + 0.25 s more before it exited
    prev = {"10": row(5.0, 1.0, 50.0), "11": row(3.0, 1.0, 60.0, ppid=10)}
    cur = {"10": row(5.2, 1.1, 50.0, reaped_user=3.5, reaped_system=1.25)}
    assert cpu(prev, cur) == (0.2 + 0.5, 0.1 + 0.25)


def test_a_grandchild_reaped_by_the_child_before_the_child_exits_is_not_counted_twice():
    prev = {"10": row(1.0, 0.0, 50.0), "11": row(2.0, 0.0, 60.0, reaped_user=4.0, ppid=10)}
    cur = {"10": row(1.0, 0.0, 50.0, reaped_user=2.5 + 4.0)}  # the child's own 2.5 s and its 4.0 s reaped
    assert cpu(prev, cur) == (0.5, 0.0)


def test_a_child_born_and_gone_inside_the_interval_counts_whole():
    prev = {"10": row(1.0, 0.0, 50.0)}
    cur = {"10": row(1.0, 0.0, 50.0, reaped_user=0.7, reaped_system=0.1)}
    assert cpu(prev, cur) == (0.7, 0.1)


def test_a_process_reaped_outside_the_group_loses_its_last_interval():
    # a client whose parent (the run's own process, 1) is not in the group: nothing to find it in
    prev = {"20": row(2.0, 1.0, 60.0, ppid=1), "21": row(1.0, 0.0, 60.0, ppid=1)}
    cur = {"21": row(1.5, 0.0, 60.0, ppid=1)}
    assert cpu(prev, cur) == (0.5, 0.0)


def test_a_new_process_counts_from_zero_and_an_old_unseen_one_not_at_all():
    prev = {"10": row(1.0, 0.0, 50.0)}
    cur = {"10": row(1.0, 0.0, 50.0), "12": row(0.3, 0.1, 100.5, reaped_user=0.2),
           "13": row(9.0, 9.0, 10.0, reaped_user=9.0)}  # born long before prev_t, joined the group now
    assert cpu(prev, cur) == (0.5, 0.1)


def test_a_reused_pid_is_a_new_process_and_the_old_one_is_gone():
    prev = {"10": row(1.0, 0.0, 50.0), "11": row(2.0, 0.0, 60.0, ppid=10)}
    cur = {"10": row(1.0, 0.0, 50.0, reaped_user=2.4), "11": row(0.1, 0.0, 100.5, ppid=10)}
    assert cpu(prev, cur) == (0.4 + 0.1, 0.0)


def test_rows_written_before_the_reaped_columns_keep_the_old_arithmetic():
    prev = {"10": [1.0, 0.0, 0, 0, 1000, 0, 0, 50.0], "11": [2.0, 0.0, 0, 0, 1000, 0, 0, 60.0]}
    cur = {"10": [1.5, 0.25, 0, 0, 1000, 0, 0, 50.0]}
    assert cpu(prev, cur) == (0.5, 0.25)


def test_with_a_window_each_pid_counts_by_its_own_span_inside_it():
    # interval [100, 101], window from 100.75: a PID seen before counts a quarter of its increase, one born
    # at 100.5 half of its CPU (its span is [100.5, 101]), the gauge (RSS) by the interval's share
    prev = {"10": row(1.0, 0.0, 50.0)}
    cur = {"10": row(2.0, 0.0, 50.0), "12": row(0.4, 0.0, 100.5)}
    d = group_deltas(prev, cur, 100.0, 101.0, (100.75, 110.0))
    assert round(d[0], 6) == round(0.25 * 1.0 + 0.5 * 0.4, 6)
    assert d[4] == 0.25 * 2000
    assert group_deltas(prev, cur, 100.0, 101.0, (90.0, 110.0))[0] == group_deltas(prev, cur, 100.0)[0] == 1.4
    assert group_deltas(prev, cur, 100.0, 101.0, (101.5, 110.0))[0] == 0.0
