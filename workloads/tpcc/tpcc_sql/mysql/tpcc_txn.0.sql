-- One TPC-C transaction of the stored-procedure mode (workloads.tpcc_sp): the terminal's draws in, the
-- transaction chosen and run here, between its own START TRANSACTION and COMMIT. p_kind 1..100 picks the
-- mix of workloads.tpcc (New-Order 45, Payment 43, Order-Status 4, Delivery 4, Stock-Level 4); c_id =
-- NURand(1023, 1, p_cust) and the last-name number NURand(255, 0, 999) combine their two uniform draws here
-- (C 259 and 157, workloads.tpcc_data). A New-Order with p_rb = 1 fails on its unused item and is rolled
-- back; any other error leaves the procedure (a deadlock: InnoDB rolled the transaction back already).
CREATE PROCEDURE dbdiag.tpcc_txn(IN p_kind INT, IN p_w INT, IN p_nw INT, IN p_items INT, IN p_cust INT, IN p_d INT,
    IN p_ca INT, IN p_cb INT, IN p_byname INT, IN p_la INT, IN p_lb INT, IN p_ol_cnt INT, IN p_rb INT,
    IN p_remote INT, IN p_rw INT, IN p_rd INT, IN p_cents INT, IN p_carrier INT, IN p_threshold INT)
BEGIN
  DECLARE v_c INT DEFAULT ((p_ca | p_cb) + 259) % p_cust + 1;
  DECLARE v_name INT DEFAULT IF(p_byname <= 60, ((p_la | p_lb) + 157) % 1000, -1);
  DECLARE v_amount DECIMAL(12,2) DEFAULT p_cents / 100;
  DECLARE EXIT HANDLER FOR SQLSTATE '45001' ROLLBACK;
  START TRANSACTION;
  IF p_kind <= 45 THEN
    CALL dbdiag.tpcc_new_order(p_w, p_nw, p_items, p_d, v_c, p_ol_cnt, p_rb = 1);
  ELSEIF p_kind <= 88 THEN
    IF p_remote <= 85 OR p_nw = 1 THEN
      CALL dbdiag.tpcc_payment(p_w, p_d, p_w, p_d, v_c, v_name, v_amount);
    ELSE
      CALL dbdiag.tpcc_payment(p_w, p_d, p_rw + (p_rw >= p_w), p_rd, v_c, v_name, v_amount);
    END IF;
  ELSEIF p_kind <= 92 THEN
    CALL dbdiag.tpcc_order_status(p_w, p_d, v_c, v_name);
  ELSEIF p_kind <= 96 THEN
    CALL dbdiag.tpcc_delivery(p_w, p_carrier);
  ELSE
    CALL dbdiag.tpcc_stock_level(p_w, p_d, p_threshold);
  END IF;
  COMMIT;
END
