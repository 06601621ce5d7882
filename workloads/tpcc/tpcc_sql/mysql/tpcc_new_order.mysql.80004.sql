-- TPC-C 2.4.2 New-Order, the statements of workloads.tpcc's client-side new_order in the same order.
-- The order lines are drawn here, as HammerDB's routines do (item NURand(8191, 1, items) with C 7911,
-- 1% from a remote warehouse, quantity 1..10), and read back sorted by item (JSON_TABLE: MySQL 8.0.4,
-- MariaDB 10.6) so stock rows lock in one order. p_rollback: the last (largest) item is an unused id, so
-- the transaction fails after its other lines (2.4.2.3): SQLSTATE 45001, rolled back by tpcc_txn.
CREATE PROCEDURE dbdiag.tpcc_new_order(IN p_w INT, IN p_nw INT, IN p_items INT, IN p_d INT, IN p_c INT,
    IN p_ol_cnt INT, IN p_rollback INT)
BEGIN
  DECLARE v_disc DECIMAL(4,4); DECLARE v_last VARCHAR(16); DECLARE v_credit CHAR(2); DECLARE v_wtax DECIMAL(4,4);
  DECLARE v_next INT; DECLARE v_dtax DECIMAL(4,4); DECLARE v_price DECIMAL(5,2); DECLARE v_sqty INT;
  DECLARE v_dist CHAR(24); DECLARE v_n INT DEFAULT 0; DECLARE v_k INT DEFAULT 0; DECLARE v_sw INT;
  DECLARE v_iid INT; DECLARE v_qty INT; DECLARE v_local INT DEFAULT 1; DECLARE v_done INT DEFAULT 0;
  DECLARE v_lines TEXT DEFAULT '[]';
  DECLARE cur CURSOR FOR SELECT iid, sw, qty FROM JSON_TABLE(v_lines, '$[*]' COLUMNS (iid INT PATH '$[0]',
      sw INT PATH '$[1]', qty INT PATH '$[2]')) AS t ORDER BY iid, sw, qty;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
  WHILE v_k < p_ol_cnt DO
    SET v_k = v_k + 1;
    SET v_iid = ((FLOOR(RAND() * 8192) | (1 + FLOOR(RAND() * p_items))) + 7911) % p_items + 1;
    IF p_rollback AND v_k = p_ol_cnt THEN SET v_iid = p_items + 1; END IF;
    SET v_sw = p_w;
    IF p_nw > 1 AND RAND() < 0.01 THEN
      SET v_sw = 1 + FLOOR(RAND() * (p_nw - 1));
      IF v_sw >= p_w THEN SET v_sw = v_sw + 1; END IF;
      SET v_local = 0;
    END IF;
    SET v_lines = JSON_ARRAY_APPEND(v_lines, '$', JSON_ARRAY(v_iid, v_sw, 1 + FLOOR(RAND() * 10)));
  END WHILE;
  SELECT c_discount, c_last, c_credit, w_tax INTO v_disc, v_last, v_credit, v_wtax
    FROM dbdiag.customer, dbdiag.warehouse WHERE w_id = p_w AND c_w_id = w_id AND c_d_id = p_d AND c_id = p_c;
  SELECT d_next_o_id, d_tax INTO v_next, v_dtax FROM dbdiag.district WHERE d_w_id = p_w AND d_id = p_d FOR UPDATE;
  UPDATE dbdiag.district SET d_next_o_id = v_next + 1 WHERE d_w_id = p_w AND d_id = p_d;
  INSERT INTO dbdiag.orders (o_id, o_d_id, o_w_id, o_c_id, o_entry_d, o_carrier_id, o_ol_cnt, o_all_local)
    VALUES (v_next, p_d, p_w, p_c, CURRENT_TIMESTAMP, NULL, p_ol_cnt, v_local);
  INSERT INTO dbdiag.new_order (no_o_id, no_d_id, no_w_id) VALUES (v_next, p_d, p_w);
  OPEN cur;
  each_line: LOOP
    FETCH cur INTO v_iid, v_sw, v_qty;
    IF v_done THEN LEAVE each_line; END IF;
    SET v_n = v_n + 1, v_price = NULL;
    SELECT i_price INTO v_price FROM dbdiag.item WHERE i_id = v_iid;
    IF v_price IS NULL THEN
      CLOSE cur;
      SIGNAL SQLSTATE '45001' SET MESSAGE_TEXT = 'tpcc: unused item';
    END IF;
    SELECT s_quantity, CASE p_d WHEN 1 THEN s_dist_01 WHEN 2 THEN s_dist_02 WHEN 3 THEN s_dist_03
        WHEN 4 THEN s_dist_04 WHEN 5 THEN s_dist_05 WHEN 6 THEN s_dist_06 WHEN 7 THEN s_dist_07
        WHEN 8 THEN s_dist_08 WHEN 9 THEN s_dist_09 ELSE s_dist_10 END
      INTO v_sqty, v_dist FROM dbdiag.stock WHERE s_i_id = v_iid AND s_w_id = v_sw FOR UPDATE;
    UPDATE dbdiag.stock SET s_quantity = IF(v_sqty >= v_qty + 10, v_sqty - v_qty, v_sqty - v_qty + 91),
        s_ytd = s_ytd + v_qty, s_order_cnt = s_order_cnt + 1, s_remote_cnt = s_remote_cnt + (v_sw <> p_w)
      WHERE s_i_id = v_iid AND s_w_id = v_sw;
    INSERT INTO dbdiag.order_line (ol_o_id, ol_d_id, ol_w_id, ol_number, ol_i_id, ol_supply_w_id, ol_delivery_d,
        ol_quantity, ol_amount, ol_dist_info)
      VALUES (v_next, p_d, p_w, v_n, v_iid, v_sw, NULL, v_qty, ROUND(v_qty * v_price, 2), v_dist);
  END LOOP;
  CLOSE cur;
END
