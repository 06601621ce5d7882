-- TPC-C 2.4.2 New-Order, the statements of workloads.tpcc's client-side new_order in the same order.
-- The order lines are drawn here, as HammerDB's routines do (item NURand(8191, 1, items) with C 7911,
-- 1% from a remote warehouse, quantity 1..10), and sorted by item so stock rows lock in one order.
-- p_rollback: the last (largest) item is an unused id, so the transaction fails after its other lines
-- (2.4.2.3); this raises SQLSTATE TPC01, which tpcc_txn turns into a rollback of this call's work.
CREATE OR REPLACE FUNCTION dbdiag.tpcc_new_order(p_w integer, p_nw integer, p_items integer, p_d integer,
    p_c integer, p_ol_cnt integer, p_rollback boolean) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  v_disc numeric; v_last varchar; v_credit char(2); v_wtax numeric; v_next integer; v_dtax numeric;
  v_price numeric; v_sqty integer; v_dist char(24); v_n integer := 0; v_sw integer;
  v_iids integer[] := '{}'; v_sws integer[] := '{}'; v_qtys integer[] := '{}'; ln record;
BEGIN
  FOR k IN 1..p_ol_cnt LOOP
    v_iids := v_iids || ((((floor(random() * 8192)::integer) | (1 + floor(random() * p_items)::integer)) + 7911)
                         % p_items + 1);
    v_sw := p_w;
    IF p_nw > 1 AND random() < 0.01 THEN
      v_sw := 1 + floor(random() * (p_nw - 1))::integer;
      IF v_sw >= p_w THEN v_sw := v_sw + 1; END IF;
    END IF;
    v_sws := v_sws || v_sw;
    v_qtys := v_qtys || (1 + floor(random() * 10)::integer);
  END LOOP;
  IF p_rollback THEN v_iids[p_ol_cnt] := p_items + 1; END IF;
  SELECT c_discount, c_last, c_credit, w_tax INTO v_disc, v_last, v_credit, v_wtax
    FROM dbdiag.customer, dbdiag.warehouse WHERE w_id = p_w AND c_w_id = w_id AND c_d_id = p_d AND c_id = p_c;
  SELECT d_next_o_id, d_tax INTO v_next, v_dtax FROM dbdiag.district WHERE d_w_id = p_w AND d_id = p_d FOR UPDATE;
  UPDATE dbdiag.district SET d_next_o_id = v_next + 1 WHERE d_w_id = p_w AND d_id = p_d;
  INSERT INTO dbdiag.orders (o_id, o_d_id, o_w_id, o_c_id, o_entry_d, o_carrier_id, o_ol_cnt, o_all_local)
    VALUES (v_next, p_d, p_w, p_c, CURRENT_TIMESTAMP, NULL, p_ol_cnt, CASE WHEN p_w = ALL(v_sws) THEN 1 ELSE 0 END);
  INSERT INTO dbdiag.new_order (no_o_id, no_d_id, no_w_id) VALUES (v_next, p_d, p_w);
  FOR ln IN SELECT * FROM unnest(v_iids, v_sws, v_qtys) AS t(iid, sw, qty) ORDER BY iid, sw, qty LOOP
    v_n := v_n + 1;
    SELECT i_price INTO v_price FROM dbdiag.item WHERE i_id = ln.iid;
    IF NOT FOUND THEN
      RAISE EXCEPTION 'tpcc: unused item %', ln.iid USING ERRCODE = 'TPC01';
    END IF;
    SELECT s_quantity, CASE p_d WHEN 1 THEN s_dist_01 WHEN 2 THEN s_dist_02 WHEN 3 THEN s_dist_03
        WHEN 4 THEN s_dist_04 WHEN 5 THEN s_dist_05 WHEN 6 THEN s_dist_06 WHEN 7 THEN s_dist_07
        WHEN 8 THEN s_dist_08 WHEN 9 THEN s_dist_09 ELSE s_dist_10 END
      INTO v_sqty, v_dist FROM dbdiag.stock WHERE s_i_id = ln.iid AND s_w_id = ln.sw FOR UPDATE;
    UPDATE dbdiag.stock SET s_quantity = CASE WHEN v_sqty >= ln.qty + 10 THEN v_sqty - ln.qty
                                              ELSE v_sqty - ln.qty + 91 END,
        s_ytd = s_ytd + ln.qty, s_order_cnt = s_order_cnt + 1,
        s_remote_cnt = s_remote_cnt + CASE WHEN ln.sw <> p_w THEN 1 ELSE 0 END
      WHERE s_i_id = ln.iid AND s_w_id = ln.sw;
    INSERT INTO dbdiag.order_line (ol_o_id, ol_d_id, ol_w_id, ol_number, ol_i_id, ol_supply_w_id, ol_delivery_d,
        ol_quantity, ol_amount, ol_dist_info)
      VALUES (v_next, p_d, p_w, v_n, ln.iid, ln.sw, NULL, ln.qty, round(ln.qty * v_price, 2), v_dist);
  END LOOP;
  RETURN v_next;
END
$$
