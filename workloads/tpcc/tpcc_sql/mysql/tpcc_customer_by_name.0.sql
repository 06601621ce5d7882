-- TPC-C 2.5.2.2 / 2.6.2.2: the customer in the middle (position ceil(n/2)) of those with last name number
-- p_name (0..999, three syllables as workloads.tpcc_data.last_name), ordered by first name; p_c unchanged
-- when there is none (the caller's customer by number stays).
CREATE PROCEDURE dbdiag.tpcc_customer_by_name(IN p_w INT, IN p_d INT, IN p_name INT, INOUT p_c INT)
BEGIN
  DECLARE v_last VARCHAR(16) DEFAULT CONCAT(
    ELT(p_name DIV 100 + 1, 'BAR','OUGHT','ABLE','PRI','PRES','ESE','ANTI','CALLY','ATION','EING'),
    ELT(p_name DIV 10 % 10 + 1, 'BAR','OUGHT','ABLE','PRI','PRES','ESE','ANTI','CALLY','ATION','EING'),
    ELT(p_name % 10 + 1, 'BAR','OUGHT','ABLE','PRI','PRES','ESE','ANTI','CALLY','ATION','EING'));
  DECLARE v_n INT DEFAULT 0;
  DECLARE v_k INT;
  SELECT COUNT(*) INTO v_n FROM dbdiag.customer WHERE c_w_id = p_w AND c_d_id = p_d AND c_last = v_last;
  IF v_n > 0 THEN
    SET v_k = (v_n - 1) DIV 2;
    SELECT c_id INTO p_c FROM dbdiag.customer WHERE c_w_id = p_w AND c_d_id = p_d AND c_last = v_last
      ORDER BY c_first LIMIT v_k, 1;
  END IF;
END
