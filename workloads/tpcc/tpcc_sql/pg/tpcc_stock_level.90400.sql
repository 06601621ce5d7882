-- TPC-C 2.8.2 Stock-Level (read-only): distinct items of the district's last 20 orders below the threshold.
CREATE OR REPLACE FUNCTION dbdiag.tpcc_stock_level(p_w integer, p_d integer, p_threshold integer) RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
  v_next integer; v_n integer;
BEGIN
  SELECT d_next_o_id INTO v_next FROM dbdiag.district WHERE d_w_id = p_w AND d_id = p_d;
  SELECT COUNT(DISTINCT s_i_id) INTO v_n FROM dbdiag.order_line, dbdiag.stock
    WHERE ol_w_id = p_w AND ol_d_id = p_d AND ol_o_id < v_next AND ol_o_id >= v_next - 20 AND s_w_id = p_w
      AND s_i_id = ol_i_id AND s_quantity < p_threshold;
  RETURN v_n;
END
$$
