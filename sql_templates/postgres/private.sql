{# Make the table `t`, just created, its owner's alone: the statements that
   revoke what the schema's default privileges gave other roles (`revoke`),
   and those that give it back (`grant`), for when the table is published
   under a new name. `t` is a quoted relation name, bound as a literal and
   resolved by the server (regclass); format() quotes the role names. #}
WITH t AS (SELECT oid, oid::regclass::text AS name, relowner AS owner, relacl
           FROM pg_class WHERE oid = {{ p(t) }}::regclass),
     grantee AS (SELECT 0::oid AS oid, 'PUBLIC' AS name UNION ALL SELECT oid, quote_ident(rolname) FROM pg_roles)
SELECT 'revoke' AS kind, format('REVOKE ALL ON %s FROM %s', t.name, g.name) AS stmt
FROM t, LATERAL (SELECT DISTINCT grantee FROM aclexplode(t.relacl)) acl JOIN grantee g ON g.oid = acl.grantee
WHERE acl.grantee <> t.owner
UNION ALL
SELECT 'grant', format('GRANT %s ON %s TO %s%s', acl.privilege_type, t.name, g.name,
                       CASE WHEN acl.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END)
FROM t, LATERAL aclexplode(t.relacl) acl JOIN grantee g ON g.oid = acl.grantee
WHERE acl.grantee <> t.owner
