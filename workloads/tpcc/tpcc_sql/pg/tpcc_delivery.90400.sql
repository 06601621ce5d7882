-- TPC-C 2.7.4 Delivery (one batch of all ten districts in one transaction, as workloads.tpcc's client-side
-- delivery): the oldest new order of each district delivered, its customer credited. Returns orders delivered.
CREATE OR REPLACE FUNCTION dbdiag.tpcc_delivery(p_w integer, p_carrier integer) RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
  v_o integer; v_c integer; v_total numeric; v_done integer := 0;
BEGIN
  FOR d IN 1..10 LOOP
    SELECT no_o_id INTO v_o FROM dbdiag.new_order WHERE no_w_id = p_w AND no_d_id = d
      ORDER BY no_o_id LIMIT 1 FOR UPDATE;
    CONTINUE WHEN NOT FOUND;
    DELETE FROM dbdiag.new_order WHERE no_w_id = p_w AND no_d_id = d AND no_o_id = v_o;
    SELECT o_c_id INTO v_c FROM dbdiag.orders WHERE o_w_id = p_w AND o_d_id = d AND o_id = v_o;
    UPDATE dbdiag.orders SET o_carrier_id = p_carrier WHERE o_w_id = p_w AND o_d_id = d AND o_id = v_o;
    UPDATE dbdiag.order_line SET ol_delivery_d = CURRENT_TIMESTAMP
      WHERE ol_w_id = p_w AND ol_d_id = d AND ol_o_id = v_o;
    SELECT SUM(ol_amount) INTO v_total FROM dbdiag.order_line WHERE ol_w_id = p_w AND ol_d_id = d AND ol_o_id = v_o;
    UPDATE dbdiag.customer SET c_balance = c_balance + coalesce(v_total, 0), c_delivery_cnt = c_delivery_cnt + 1
      WHERE c_w_id = p_w AND c_d_id = d AND c_id = v_c;
    v_done := v_done + 1;
  END LOOP;
  RETURN v_done;
END
$$
