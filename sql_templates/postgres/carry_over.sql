{# The statements that give the staging table `new` what the table `old` it
   replaces had, in order: its owner; its grants to other roles (first
   revoking what default privileges gave `new`, then granting the table and
   column grants of `old`, PUBLIC included; the owner's own entry is not
   carried: privileges it revoked from itself come back);
   and its comments (table and columns, for the columns both have).
   Each row: its step, the statement, and for an owner (step 2) the role
   given the table (`role`), for a grant another role made with its grant
   option that role and the grantee (`role`, `grantee`): the owner makes it
   again, which a REVOKE ... CASCADE from that role no longer reaches, and
   the run says so.
   format() quotes every name (%I) and value (%L) on the server. #}
WITH o AS (SELECT {{ p(old) }}::regclass::oid AS oid,
                  (SELECT relowner FROM pg_class WHERE oid = {{ p(old) }}::regclass) AS owner),
     n AS (SELECT {{ p(new) }}::regclass::oid AS oid, {{ p(new) }}::regclass::text AS name,
                  (SELECT relowner FROM pg_class WHERE oid = {{ p(new) }}::regclass) AS owner),
     grantee AS (SELECT 0::oid AS oid, 'PUBLIC' AS name UNION ALL SELECT oid, quote_ident(rolname) FROM pg_roles),
     shared AS (
        SELECT a.attname, a.attacl, col_description(o.oid, a.attnum) AS comment
        FROM pg_attribute a, o
        WHERE a.attrelid = o.oid AND a.attnum > 0 AND NOT a.attisdropped
          AND a.attname IN (SELECT attname FROM pg_attribute, n WHERE attrelid = n.oid AND attnum > 0 AND NOT attisdropped)
     ),
     steps AS (
        SELECT 1 AS step, format('REVOKE ALL ON %s FROM %s', n.name, g.name) AS stmt, NULL::text AS role,
               NULL::text AS grantee
        FROM n, pg_class c, LATERAL (SELECT DISTINCT grantee FROM aclexplode(c.relacl)) acl
             JOIN grantee g ON g.oid = acl.grantee
        WHERE c.oid = n.oid AND acl.grantee <> n.owner
        UNION ALL
        SELECT 2, format('ALTER TABLE %s OWNER TO %I', n.name, pg_get_userbyid(o.owner)), pg_get_userbyid(o.owner),
               NULL
        FROM o, n WHERE o.owner <> n.owner
        UNION ALL
        SELECT 3, format('GRANT %s ON %s TO %s%s', acl.privilege_type, n.name, g.name,
                         CASE WHEN acl.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END),
               CASE WHEN acl.grantor <> o.owner THEN pg_get_userbyid(acl.grantor) END, g.name
        FROM o, n, pg_class c, LATERAL aclexplode(c.relacl) acl JOIN grantee g ON g.oid = acl.grantee
        WHERE c.oid = o.oid AND acl.grantee <> o.owner
        UNION ALL
        SELECT 3, format('GRANT %s (%I) ON %s TO %s%s', acl.privilege_type, s.attname, n.name, g.name,
                         CASE WHEN acl.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END),
               CASE WHEN acl.grantor <> o.owner THEN pg_get_userbyid(acl.grantor) END, g.name
        FROM o, n, shared s, LATERAL aclexplode(s.attacl) acl JOIN grantee g ON g.oid = acl.grantee
        WHERE acl.grantee <> o.owner
        UNION ALL
        SELECT 4, format('COMMENT ON TABLE %s IS %L', n.name, obj_description(o.oid, 'pg_class')), NULL, NULL
        FROM o, n WHERE obj_description(o.oid, 'pg_class') IS NOT NULL
        UNION ALL
        SELECT 4, format('COMMENT ON COLUMN %s.%I IS %L', n.name, s.attname, s.comment), NULL, NULL
        FROM n, shared s WHERE s.comment IS NOT NULL
     )
SELECT step, stmt, role, grantee FROM steps ORDER BY step
