-- TPC-C 2.6.2 Order-Status (read-only), the statements of workloads.tpcc's client-side order_status.
-- p_name: a last-name number (0..999) to select the customer by, or -1 to take customer p_c.
CREATE PROCEDURE dbdiag.tpcc_order_status(IN p_w INT, IN p_d INT, IN p_c INT, IN p_name INT)
BEGIN
  DECLARE v_c INT DEFAULT p_c; DECLARE v_o INT DEFAULT NULL; DECLARE v_n INT;
  DECLARE v_bal DECIMAL(12,2); DECLARE v_first VARCHAR(16); DECLARE v_middle CHAR(2); DECLARE v_last VARCHAR(16);
  DECLARE v_carrier INT; DECLARE v_entry DATETIME;
  IF p_name >= 0 THEN
    CALL dbdiag.tpcc_customer_by_name(p_w, p_d, p_name, v_c);
  END IF;
  SELECT c_balance, c_first, c_middle, c_last INTO v_bal, v_first, v_middle, v_last FROM dbdiag.customer
    WHERE c_w_id = p_w AND c_d_id = p_d AND c_id = v_c;
  SELECT o_id, o_carrier_id, o_entry_d INTO v_o, v_carrier, v_entry FROM dbdiag.orders
    WHERE o_w_id = p_w AND o_d_id = p_d AND o_c_id = v_c ORDER BY o_id DESC LIMIT 1;
  IF v_o IS NOT NULL THEN
    SELECT COUNT(*) INTO v_n FROM (SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d
      FROM dbdiag.order_line WHERE ol_w_id = p_w AND ol_d_id = p_d AND ol_o_id = v_o) l;
  END IF;
END
