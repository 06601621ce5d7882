/* dbdiag */
-- Every thread (Id, User, Host, db, Command, Time, State, Info: 100 characters[, Progress]) for the wait
-- sampler: SHOW PROCESSLIST, as information_schema.PROCESSLIST makes MariaDB fill an on-disk temporary table at
-- each read (10 a second here). The sampler leaves its own thread out by id.
SHOW PROCESSLIST
