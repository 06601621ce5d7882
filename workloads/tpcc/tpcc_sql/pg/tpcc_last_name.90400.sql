-- TPC-C 4.3.2.3: a customer's last name from a number 0..999, three syllables (workloads.tpcc_data.last_name).
CREATE OR REPLACE FUNCTION dbdiag.tpcc_last_name(n integer) RETURNS varchar LANGUAGE sql IMMUTABLE AS $$
  SELECT (ARRAY['BAR','OUGHT','ABLE','PRI','PRES','ESE','ANTI','CALLY','ATION','EING'])[n / 100 + 1]
      || (ARRAY['BAR','OUGHT','ABLE','PRI','PRES','ESE','ANTI','CALLY','ATION','EING'])[n / 10 % 10 + 1]
      || (ARRAY['BAR','OUGHT','ABLE','PRI','PRES','ESE','ANTI','CALLY','ATION','EING'])[n % 10 + 1]
$$
