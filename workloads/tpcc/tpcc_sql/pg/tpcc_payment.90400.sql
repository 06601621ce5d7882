-- TPC-C 2.5.2 Payment, the statements of workloads.tpcc's client-side payment in the same order.
-- p_name: a last-name number (0..999) to select the customer by, or -1 to take customer p_c.
CREATE OR REPLACE FUNCTION dbdiag.tpcc_payment(p_w integer, p_d integer, p_cw integer, p_cd integer, p_c integer,
    p_name integer, p_amount numeric) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  v_wname varchar; v_dname varchar; v_c integer := 0; v_credit char(2); v_data varchar; r record;
BEGIN
  UPDATE dbdiag.warehouse SET w_ytd = w_ytd + p_amount WHERE w_id = p_w;
  SELECT w_name INTO v_wname FROM (SELECT w_name, w_street_1, w_street_2, w_city, w_state, w_zip
    FROM dbdiag.warehouse WHERE w_id = p_w) w;
  UPDATE dbdiag.district SET d_ytd = d_ytd + p_amount WHERE d_w_id = p_w AND d_id = p_d;
  SELECT d_name INTO v_dname FROM (SELECT d_name, d_street_1, d_street_2, d_city, d_state, d_zip
    FROM dbdiag.district WHERE d_w_id = p_w AND d_id = p_d) d;
  IF p_name >= 0 THEN
    v_c := dbdiag.tpcc_customer_by_name(p_cw, p_cd, dbdiag.tpcc_last_name(p_name));
  END IF;
  IF v_c = 0 THEN v_c := p_c; END IF;
  SELECT c_first, c_middle, c_last, c_street_1, c_street_2, c_city, c_state, c_zip, c_phone, c_since, c_credit,
         c_credit_lim, c_discount, c_balance INTO r
    FROM dbdiag.customer WHERE c_w_id = p_cw AND c_d_id = p_cd AND c_id = v_c FOR UPDATE;
  IF r.c_credit = 'BC' THEN
    SELECT c_data INTO v_data FROM dbdiag.customer WHERE c_w_id = p_cw AND c_d_id = p_cd AND c_id = v_c;
    UPDATE dbdiag.customer SET c_balance = c_balance - p_amount, c_ytd_payment = c_ytd_payment + p_amount,
        c_payment_cnt = c_payment_cnt + 1,
        c_data = left(format('%s %s %s %s %s %s | %s', v_c, p_cd, p_cw, p_d, p_w, to_char(p_amount, 'FM9999990.00'),
                             v_data), 500)
      WHERE c_w_id = p_cw AND c_d_id = p_cd AND c_id = v_c;
  ELSE
    UPDATE dbdiag.customer SET c_balance = c_balance - p_amount, c_ytd_payment = c_ytd_payment + p_amount,
        c_payment_cnt = c_payment_cnt + 1 WHERE c_w_id = p_cw AND c_d_id = p_cd AND c_id = v_c;
  END IF;
  INSERT INTO dbdiag.history (h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id, h_date, h_amount, h_data)
    VALUES (v_c, p_cd, p_cw, p_d, p_w, CURRENT_TIMESTAMP, p_amount, left(v_wname || '    ' || v_dname, 24));
  RETURN v_c;
END
$$
