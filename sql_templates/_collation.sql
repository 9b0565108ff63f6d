{# PostgreSQL only: ' COLLATE <name>' after the type of column `a` (a
   pg_attribute row) when its collation is not its type's own, else ''.
   Included by postgres/replace_plan.sql and postgres/server_columns.sql. #}
CASE WHEN a.attcollation <> (SELECT t.typcollation FROM pg_type t WHERE t.oid = a.atttypid)
    THEN ' COLLATE ' || a.attcollation::regcollation::text ELSE '' END
