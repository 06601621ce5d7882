-- TPC-C 2.6.2 Order-Status (read-only), the statements of workloads.tpcc's client-side order_status.
-- p_name: a last-name number (0..999) to select the customer by, or -1 to take customer p_c.
CREATE OR REPLACE FUNCTION dbdiag.tpcc_order_status(p_w integer, p_d integer, p_c integer, p_name integer)
    RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  v_c integer := 0; v_o integer; r record; n integer;
BEGIN
  IF p_name >= 0 THEN
    v_c := dbdiag.tpcc_customer_by_name(p_w, p_d, dbdiag.tpcc_last_name(p_name));
  END IF;
  IF v_c = 0 THEN v_c := p_c; END IF;
  SELECT c_balance, c_first, c_middle, c_last INTO r FROM dbdiag.customer
    WHERE c_w_id = p_w AND c_d_id = p_d AND c_id = v_c;
  SELECT o_id INTO v_o FROM (SELECT o_id, o_carrier_id, o_entry_d FROM dbdiag.orders
    WHERE o_w_id = p_w AND o_d_id = p_d AND o_c_id = v_c ORDER BY o_id DESC LIMIT 1) o;
  IF FOUND THEN
    SELECT count(*) INTO n FROM (SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d
      FROM dbdiag.order_line WHERE ol_w_id = p_w AND ol_d_id = p_d AND ol_o_id = v_o) l;
  END IF;
  RETURN v_c;
END
$$
