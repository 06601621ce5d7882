-- TPC-C 2.5.2.2 / 2.6.2.2: the customer in the middle (position ceil(n/2)) of those with this last name,
-- ordered by first name; 0 when there is none (the caller then takes the customer by number).
CREATE OR REPLACE FUNCTION dbdiag.tpcc_customer_by_name(p_w integer, p_d integer, p_last varchar)
    RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  v_ids integer[];
BEGIN
  SELECT array_agg(c_id ORDER BY c_first) INTO v_ids FROM dbdiag.customer
    WHERE c_w_id = p_w AND c_d_id = p_d AND c_last = p_last;
  IF v_ids IS NULL THEN RETURN 0; END IF;
  RETURN v_ids[(array_length(v_ids, 1) - 1) / 2 + 1];
END
$$
