-- dbdiag's insert transaction for sysbench 1.0: the same prepared INSERT into the same table
-- (dbdiag.insert_data, created by dbdiag's insert dataset), a value in 1..1,000,000 and a 20-letter
-- string, one autocommit statement per event. Used by bench/pairs.py beside oltp_insert, whose row
-- (id, k, c char(120), pad char(60)) is another shape.

function thread_init()
   drv = sysbench.sql.driver()
   con = drv:connect()
   stmt = con:prepare("INSERT INTO dbdiag.insert_data (val, txt) VALUES (?, ?)")
   val = stmt:bind_create(sysbench.sql.type.INT)
   txt = stmt:bind_create(sysbench.sql.type.VARCHAR, 20)
   stmt:bind_param(val, txt)
end

function event()
   val:set(sysbench.rand.uniform(1, 1000000))
   txt:set(sysbench.rand.string("@@@@@@@@@@@@@@@@@@@@"))
   stmt:execute()
end

function thread_done()
   stmt:close()
   con:disconnect()
end
