-- One TPC-C transaction of the stored-procedure mode (workloads.tpcc_sp): the terminal's draws in, the
-- transaction chosen and run here, in the CALL's own (autocommit) transaction. A procedure (PostgreSQL 11) so
-- that one CALL text serves both engines. p_kind 1..100 picks the mix of workloads.tpcc (New-Order 45, Payment 43,
-- Order-Status 4, Delivery 4, Stock-Level 4); c_id = NURand(1023, 1, p_cust) and the last-name number
-- NURand(255, 0, 999) combine their two uniform draws here (C 259 and 157, workloads.tpcc_data).
CREATE OR REPLACE PROCEDURE dbdiag.tpcc_txn(p_kind integer, p_w integer, p_nw integer, p_items integer,
    p_cust integer, p_d integer, p_ca integer, p_cb integer, p_byname integer, p_la integer, p_lb integer,
    p_ol_cnt integer, p_rb integer, p_remote integer, p_rw integer, p_rd integer, p_cents integer,
    p_carrier integer, p_threshold integer) LANGUAGE plpgsql AS $$
DECLARE
  v_c integer := ((p_ca | p_cb) + 259) % p_cust + 1;
  v_name integer := CASE WHEN p_byname <= 60 THEN ((p_la | p_lb) + 157) % 1000 ELSE -1 END;
BEGIN
  IF p_kind <= 45 THEN
    IF p_rb = 1 THEN
      BEGIN
        PERFORM dbdiag.tpcc_new_order(p_w, p_nw, p_items, p_d, v_c, p_ol_cnt, true);
      EXCEPTION WHEN SQLSTATE 'TPC01' THEN
        NULL;  -- the unused item: everything this New-Order wrote is undone
      END;
      RETURN;
    END IF;
    PERFORM dbdiag.tpcc_new_order(p_w, p_nw, p_items, p_d, v_c, p_ol_cnt, false);
    RETURN;
  ELSIF p_kind <= 88 THEN
    IF p_remote <= 85 OR p_nw = 1 THEN
      PERFORM dbdiag.tpcc_payment(p_w, p_d, p_w, p_d, v_c, v_name, round(p_cents / 100.0, 2));
    ELSE
      PERFORM dbdiag.tpcc_payment(p_w, p_d, p_rw + CASE WHEN p_rw >= p_w THEN 1 ELSE 0 END, p_rd, v_c, v_name,
                                  round(p_cents / 100.0, 2));
    END IF;
    RETURN;
  ELSIF p_kind <= 92 THEN
    PERFORM dbdiag.tpcc_order_status(p_w, p_d, v_c, v_name);
    RETURN;
  ELSIF p_kind <= 96 THEN
    PERFORM dbdiag.tpcc_delivery(p_w, p_carrier);
    RETURN;
  END IF;
  PERFORM dbdiag.tpcc_stock_level(p_w, p_d, p_threshold);
END
$$
