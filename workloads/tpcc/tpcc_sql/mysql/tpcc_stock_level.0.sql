-- TPC-C 2.8.2 Stock-Level (read-only): distinct items of the district's last 20 orders below the threshold.
CREATE PROCEDURE dbdiag.tpcc_stock_level(IN p_w INT, IN p_d INT, IN p_threshold INT)
BEGIN
  DECLARE v_next INT; DECLARE v_n INT;
  SELECT d_next_o_id INTO v_next FROM dbdiag.district WHERE d_w_id = p_w AND d_id = p_d;
  SELECT COUNT(DISTINCT s_i_id) INTO v_n FROM dbdiag.order_line, dbdiag.stock
    WHERE ol_w_id = p_w AND ol_d_id = p_d AND ol_o_id < v_next AND ol_o_id >= v_next - 20 AND s_w_id = p_w
      AND s_i_id = ol_i_id AND s_quantity < p_threshold;
END
