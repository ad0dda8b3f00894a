SET jit = off;
CREATE TEMP TABLE probe AS
SELECT DISTINCT f.id AS filter_id, (1 + random() * 230000)::bigint AS profile_id
FROM (SELECT id FROM saved_filters WHERE id BETWEEN 5000 AND 6100) f, generate_series(1, 45);
INSERT INTO probe SELECT filter_id, profile_id FROM filter_matches WHERE filter_id BETWEEN 5000 AND 6100 AND random() < 0.01 ON CONFLICT DO NOTHING;
SELECT array_agg(filter_id ORDER BY filter_id, profile_id) AS fs, array_agg(profile_id ORDER BY filter_id, profile_id) AS ps FROM probe \gset
PREPARE a(bigint[], bigint[]) AS SELECT count(*) FROM (SELECT unnest($1::bigint[]) AS filter_id, unnest($2::bigint[]) AS profile_id) AS u
WHERE EXISTS (SELECT 1 FROM filter_matches m WHERE m.filter_id = u.filter_id AND m.profile_id = u.profile_id);
PREPARE b(bigint[], bigint[], bigint, bigint) AS SELECT count(*) FROM (SELECT unnest($1::bigint[]) AS filter_id, unnest($2::bigint[]) AS profile_id) AS u
WHERE EXISTS (SELECT 1 FROM filter_matches m WHERE m.filter_id = u.filter_id AND m.profile_id = u.profile_id AND m.filter_id BETWEEN $3 AND $4);
\timing on
EXECUTE a(:'fs', :'ps');
EXECUTE b(:'fs', :'ps', 5000, 6100);
EXECUTE a(:'fs', :'ps');
EXECUTE b(:'fs', :'ps', 5000, 6100);
EXECUTE a(:'fs', :'ps');
EXECUTE b(:'fs', :'ps', 5000, 6100);
\timing off
EXPLAIN (COSTS ON) EXECUTE b(:'fs', :'ps', 5000, 6100);
-- The same chunk through a forced merge join over the chunk's filter range.
SET enable_nestloop = off; SET enable_hashjoin = off;
\timing on
EXECUTE b(:'fs', :'ps', 5000, 6100);
EXECUTE b(:'fs', :'ps', 5000, 6100);
EXECUTE b(:'fs', :'ps', 5000, 6100);
