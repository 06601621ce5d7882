"""An application-like load dbdiag does not know: a few statements per transaction and some think time.

Used by tests/integration/test_watch.py as ``dbdiag watch ... -- python app_like.py DSN SECONDS``. Each of
THREADS threads opens its own psycopg connection and runs, until SECONDS are up: read an account, update it,
insert a history row, commit, think THINK_S. It prints its own count at the end, in words dbdiag does not parse.
"""

import sys
import threading
import time

import psycopg

THREADS = 3
THINK_S = 0.01


def worker(dsn: str, until: float, counts: list, i: int) -> None:
    with psycopg.connect(dsn) as conn:
        n = 0
        while time.time() < until:
            with conn.transaction():
                aid = (n * 7 + i) % 100 + 1
                conn.execute("SELECT balance FROM app_account WHERE id = %s", (aid,)).fetchone()
                conn.execute("UPDATE app_account SET balance = balance + 1 WHERE id = %s", (aid,))
                conn.execute("INSERT INTO app_history (account, at) VALUES (%s, now())", (aid,))
            n += 1
            time.sleep(THINK_S)
        counts[i] = n


def main() -> None:
    dsn, seconds = sys.argv[1], float(sys.argv[2])
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("CREATE TABLE IF NOT EXISTS app_account (id int PRIMARY KEY, balance bigint NOT NULL)")
        c.execute("CREATE TABLE IF NOT EXISTS app_history (account int, at timestamptz)")
        c.execute("INSERT INTO app_account SELECT g, 0 FROM generate_series(1, 100) g ON CONFLICT DO NOTHING")
    counts = [0] * THREADS
    start = time.time()
    threads = [threading.Thread(target=worker, args=(dsn, start + seconds, counts, i)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(f"app finished: {sum(counts)} business transactions in {time.time() - start:.2f} s", flush=True)


if __name__ == "__main__":
    main()
