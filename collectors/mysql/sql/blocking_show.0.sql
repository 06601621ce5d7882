/* dbdiag */
-- Every thread (Id, User, Host, db, Command, Time, State, Info[, Progress]) for the blocking sampler's ticks:
-- SHOW FULL PROCESSLIST makes no temporary table, where information_schema.PROCESSLIST (blocking_threads) makes
-- MariaDB fill an on-disk one at each read: 10 a second while InnoDB row-lock waits keep the lock gate open, on
-- the disk that flushes the redo log. Time is whole seconds here, so blocking_threads (TIME_MS) is read only
-- when a thread waits for a metadata or table lock, whose wait it dates. The sampler leaves its own thread out.
SHOW FULL PROCESSLIST
