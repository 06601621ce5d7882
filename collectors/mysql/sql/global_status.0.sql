/* dbdiag */ SHOW GLOBAL STATUS
