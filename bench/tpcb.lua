-- dbdiag's read-write transaction (pgbench's built-in TPC-B-like) for sysbench 1.0: the same five
-- prepared statements, in the same order, on the same tables (dbdiag.pgbench_*, created by dbdiag's
-- pgbench dataset), between BEGIN and COMMIT, which are prepared too (as sysbench's oltp_common.lua
-- does, and as dbdiag's native executor sends them on MariaDB).
-- Used by bench/pairs.py for MariaDB, where pgbench cannot run: the like-for-like read-write pair.
--
--   sysbench bench/tpcb.lua --db-driver=mysql ... --scale=10 --threads=4 --time=8 run

sysbench.cmdline.options = {
   scale = {"pgbench scale of the dbdiag.pgbench_* tables (branches; tellers = 10 x, accounts = 100,000 x)", 10}
}

function thread_init()
   drv = sysbench.sql.driver()
   con = drv:connect()
   nb = sysbench.opt.scale
   nt = 10 * nb
   na = 100000 * nb
   local int = sysbench.sql.type.INT  -- bound as int64, as sysbench binds every integer type
   begin_ = con:prepare("BEGIN")
   commit_ = con:prepare("COMMIT")
   upd_a = con:prepare("UPDATE dbdiag.pgbench_accounts SET abalance = abalance + ? WHERE aid = ?")
   sel_a = con:prepare("SELECT abalance FROM dbdiag.pgbench_accounts WHERE aid = ?")
   upd_t = con:prepare("UPDATE dbdiag.pgbench_tellers SET tbalance = tbalance + ? WHERE tid = ?")
   upd_b = con:prepare("UPDATE dbdiag.pgbench_branches SET bbalance = bbalance + ? WHERE bid = ?")
   ins_h = con:prepare("INSERT INTO dbdiag.pgbench_history (tid, bid, aid, delta, mtime) " ..
                       "VALUES (?, ?, ?, ?, CURRENT_TIMESTAMP)")
   aid, bid, tid, delta = upd_a:bind_create(int), upd_a:bind_create(int), upd_a:bind_create(int),
                          upd_a:bind_create(int)
   -- one set of bound values shared by all five statements, as pgbench's variables
   upd_a:bind_param(delta, aid)
   sel_a:bind_param(aid)
   upd_t:bind_param(delta, tid)
   upd_b:bind_param(delta, bid)
   ins_h:bind_param(tid, bid, aid, delta)
end

function event()
   aid:set(sysbench.rand.uniform(1, na))
   bid:set(sysbench.rand.uniform(1, nb))
   tid:set(sysbench.rand.uniform(1, nt))
   -- sysbench.rand.uniform takes and returns uint32: -5000..5000 as an offset of 0..10000
   delta:set(sysbench.rand.uniform(0, 10000) - 5000)
   begin_:execute()
   upd_a:execute()
   sel_a:execute()
   upd_t:execute()
   upd_b:execute()
   ins_h:execute()
   commit_:execute()
end

function thread_done()
   for _, s in ipairs({begin_, upd_a, sel_a, upd_t, upd_b, ins_h, commit_}) do
      s:close()
   end
   con:disconnect()
end
