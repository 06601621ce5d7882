-- TPC-C 2.5.2 Payment, the statements of workloads.tpcc's client-side payment in the same order.
-- p_name: a last-name number (0..999) to select the customer by, or -1 to take customer p_c.
CREATE PROCEDURE dbdiag.tpcc_payment(IN p_w INT, IN p_d INT, IN p_cw INT, IN p_cd INT, IN p_c INT, IN p_name INT,
    IN p_amount DECIMAL(12,2))
BEGIN
  DECLARE v_wname VARCHAR(10); DECLARE v_dname VARCHAR(10); DECLARE v_c INT DEFAULT p_c;
  DECLARE v_credit CHAR(2); DECLARE v_data VARCHAR(500);
  DECLARE v_s1, v_s2, v_city VARCHAR(20); DECLARE v_state CHAR(2); DECLARE v_zip CHAR(9);
  DECLARE v_first VARCHAR(16); DECLARE v_middle CHAR(2); DECLARE v_last VARCHAR(16); DECLARE v_phone CHAR(16);
  DECLARE v_since DATETIME; DECLARE v_lim, v_bal DECIMAL(12,2); DECLARE v_disc DECIMAL(4,4);
  UPDATE dbdiag.warehouse SET w_ytd = w_ytd + p_amount WHERE w_id = p_w;
  SELECT w_name, w_street_1, w_street_2, w_city, w_state, w_zip INTO v_wname, v_s1, v_s2, v_city, v_state, v_zip
    FROM dbdiag.warehouse WHERE w_id = p_w;
  UPDATE dbdiag.district SET d_ytd = d_ytd + p_amount WHERE d_w_id = p_w AND d_id = p_d;
  SELECT d_name, d_street_1, d_street_2, d_city, d_state, d_zip INTO v_dname, v_s1, v_s2, v_city, v_state, v_zip
    FROM dbdiag.district WHERE d_w_id = p_w AND d_id = p_d;
  IF p_name >= 0 THEN
    CALL dbdiag.tpcc_customer_by_name(p_cw, p_cd, p_name, v_c);
  END IF;
  SELECT c_first, c_middle, c_last, c_street_1, c_street_2, c_city, c_state, c_zip, c_phone, c_since, c_credit,
         c_credit_lim, c_discount, c_balance
    INTO v_first, v_middle, v_last, v_s1, v_s2, v_city, v_state, v_zip, v_phone, v_since, v_credit, v_lim, v_disc,
         v_bal
    FROM dbdiag.customer WHERE c_w_id = p_cw AND c_d_id = p_cd AND c_id = v_c FOR UPDATE;
  IF v_credit = 'BC' THEN
    SELECT c_data INTO v_data FROM dbdiag.customer WHERE c_w_id = p_cw AND c_d_id = p_cd AND c_id = v_c;
    UPDATE dbdiag.customer SET c_balance = c_balance - p_amount, c_ytd_payment = c_ytd_payment + p_amount,
        c_payment_cnt = c_payment_cnt + 1,
        c_data = LEFT(CONCAT_WS(' ', v_c, p_cd, p_cw, p_d, p_w, p_amount, '|', v_data), 500)
      WHERE c_w_id = p_cw AND c_d_id = p_cd AND c_id = v_c;
  ELSE
    UPDATE dbdiag.customer SET c_balance = c_balance - p_amount, c_ytd_payment = c_ytd_payment + p_amount,
        c_payment_cnt = c_payment_cnt + 1 WHERE c_w_id = p_cw AND c_d_id = p_cd AND c_id = v_c;
  END IF;
  INSERT INTO dbdiag.history (h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id, h_date, h_amount, h_data)
    VALUES (v_c, p_cd, p_cw, p_d, p_w, CURRENT_TIMESTAMP, p_amount, LEFT(CONCAT(v_wname, '    ', v_dname), 24));
END
