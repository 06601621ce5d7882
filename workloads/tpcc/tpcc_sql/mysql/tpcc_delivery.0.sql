-- TPC-C 2.7.4 Delivery (one batch of all ten districts in one transaction, as workloads.tpcc's client-side
-- delivery): the oldest new order of each district delivered, its customer credited.
CREATE PROCEDURE dbdiag.tpcc_delivery(IN p_w INT, IN p_carrier INT)
BEGIN
  DECLARE v_d INT DEFAULT 0; DECLARE v_o INT; DECLARE v_c INT; DECLARE v_total DECIMAL(12,2);
  WHILE v_d < 10 DO
    SET v_d = v_d + 1, v_o = NULL;
    SELECT no_o_id INTO v_o FROM dbdiag.new_order WHERE no_w_id = p_w AND no_d_id = v_d
      ORDER BY no_o_id LIMIT 1 FOR UPDATE;
    IF v_o IS NOT NULL THEN
      DELETE FROM dbdiag.new_order WHERE no_w_id = p_w AND no_d_id = v_d AND no_o_id = v_o;
      SELECT o_c_id INTO v_c FROM dbdiag.orders WHERE o_w_id = p_w AND o_d_id = v_d AND o_id = v_o;
      UPDATE dbdiag.orders SET o_carrier_id = p_carrier WHERE o_w_id = p_w AND o_d_id = v_d AND o_id = v_o;
      UPDATE dbdiag.order_line SET ol_delivery_d = CURRENT_TIMESTAMP
        WHERE ol_w_id = p_w AND ol_d_id = v_d AND ol_o_id = v_o;
      SELECT SUM(ol_amount) INTO v_total FROM dbdiag.order_line
        WHERE ol_w_id = p_w AND ol_d_id = v_d AND ol_o_id = v_o;
      UPDATE dbdiag.customer SET c_balance = c_balance + COALESCE(v_total, 0), c_delivery_cnt = c_delivery_cnt + 1
        WHERE c_w_id = p_w AND c_d_id = v_d AND c_id = v_c;
    END IF;
  END WHILE;
END
