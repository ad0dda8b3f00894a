"""8. Hostile input: 20 filters (deep, huge, SQL text, numbers beyond 64 bits, U+FFFD, not objects, …) and 10
out-of-domain profiles added to the world. Each invalid filter is recorded with the expected item_key, and the
world's rows (hostile profiles taken out of digests) equal the clean run's. docs/fault-scenarios.md, "8",
lists the rows and what is exact."""

import re
import subprocess
import sys

from common import Context, Fatal, detail, now_s, say

# What PostgreSQL itself refuses in a UTF8 database (so it can never reach the worker).
REFUSED = [
    r"""SELECT convert_from('\xff'::bytea, 'UTF8')""",
    r"""SELECT '{"name": "\ud800"}'::jsonb""",
    r"""SELECT '{"name": "\u0000"}'::jsonb""",
    r"""SELECT ('{"age": ' || repeat('[', 100000) || repeat(']', 100000) || '}')::jsonb""",
]

# id = MAXF + k; expected item_key ('-' = the document as a whole, NULL; 'valid' = a valid filter).
HOSTILE_FILTERS_SQL = r"""CREATE TEMP TABLE h (k int, name text, conditions jsonb, expect text);
INSERT INTO h VALUES
 (1, 'deep', ('{"age": ' || repeat('[', 5000) || repeat(']', 5000) || '}')::jsonb, '-'),
 (2, 'huge invalid list', jsonb_build_object('residence', jsonb_build_object('anyOf',
      (SELECT jsonb_agg(CASE WHEN g = 15000 THEN 99 ELSE 1 + g % 48 END ORDER BY g) FROM generate_series(1, 15000) g))), 'residence'),
 (3, 'huge valid list', jsonb_build_object('residence', jsonb_build_object('anyOf',
      (SELECT jsonb_agg(13) FROM generate_series(1, 15000)))), 'valid'),
 (4, 'small twin of 3', '{"residence": {"anyOf": [13]}}', 'valid'),
 (5, repeat('n', 1048576), jsonb_build_object('smoking', jsonb_build_object('anyOf', jsonb_build_array(repeat('a', 1048576)))), '-'),
 (6, $$'; DROP TABLE profiles; --$$, jsonb_build_object($$'; DROP TABLE profiles; --$$,
      jsonb_build_object('anyOf', jsonb_build_array($$'; DROP TABLE profiles; --$$))), $$"'; DROP TABLE profiles; --"$$),
 (7, $$x'); DELETE FROM filter_matches; --$$, jsonb_build_object('age', jsonb_build_object('min', $$'; DROP TABLE profiles; --$$)), 'age'),
 (8, $$"quoted" \ back\slash$$, jsonb_build_object('gender', jsonb_build_object('anyOf', '[1]'::jsonb,
      $$'); DELETE FROM filter_matches; --$$, 1)), 'gender'),
 (9, 'beyond 64 bits', '{"height": {"min": 123456789012345678901234567890}}', 'height'),
 (10, '2^64', '{"communities": {"anyOf": [18446744073709551616]}}', 'communities'),
 (11, '-2^63-1', '{"age": {"min": -9223372036854775809}}', 'age'),
 (12, '1e400', '{"income": {"max": 1e400}}', 'income'),
 (13, E'caf\uFFFD', E'{"resid\\uFFFDence": {"anyOf": [13]}}', E'"resid\uFFFDence"'),
 (14, 'escaped \ud800 (text)', '{"\\ud800": 1}', '"\\ud800"'),
 (15, 'a list', '[]', '-'),
 (16, 'null', 'null', '-'),
 (17, 'a string', to_jsonb($$'; DROP TABLE profiles; --$$::text), '-'),
 (18, 'a number', '42', '-'),
 (19, 'a string for a flag', '{"has_photo": "yes"}', 'has_photo'),
 (20, $$Robert'); DROP TABLE saved_filters;-- "x" \ $$ || E'\uFFFD', '{"gender": {"anyOf": [2]}}', 'valid');
INSERT INTO saved_filters (id, owner_id, name, conditions, created_at, updated_at)
SELECT :f + k, :o, name, conditions, timestamptz '2026-01-01 00:00+00', timestamptz '2026-01-01 00:00+00' FROM h;
CREATE TABLE fault_hostile_expect AS SELECT :f + k AS filter_id, expect FROM h;
"""

# Out-of-domain profiles (ids MAXP + k): one value out of its item's domain each.
HOSTILE_PROFILES = """INSERT INTO fault_hostile_profiles VALUES (1, 'residence', 'residence', '99'), (2, 'gender', 'gender', '0'),
          (3, 'gender', 'gender', '7'), (4, 'height', 'height_cm', '-5'), (5, 'communities', 'communities', '{-1,-2}'),
          (6, 'status', 'status', '9'), (7, 'personality', 'personality', '{0,41,-3}'), (8, 'income', 'income_band', '99'),
          (9, 'age', 'birth_date', '2030-01-01'), (10, 'smoking', 'smoking', '-32768')"""


def _first_line_of_psql(ctx: Context, db: str, *args) -> str:
    done = subprocess.run(ctx.server.psql_argv(db, "-At", *args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT)
    return (done.stdout.decode(errors="replace").splitlines() or [""])[0]


def hostile_input(ctx: Context) -> None:
    say("8. hostile filters and out-of-domain profiles added to the world")
    cfg, q, maxf, maxp = ctx.cfg, ctx.q, ctx.maxf, ctx.maxp
    t = now_s()
    db = "fault_s8"
    ctx.clone("fault_world", db)
    for probe in REFUSED:
        shown = re.sub(r"repeat.*", "repeat(…100000 deep…)", probe[7:60])
        said = re.sub(r"^ERROR: *", "", _first_line_of_psql(ctx, db, "-c", probe))
        detail(f"PostgreSQL refuses {shown}: {said}")
    invalid_utf8 = ctx.work / "invalid-utf8.sql"
    invalid_utf8.write_bytes(b"SELECT length(E'caf\xff');\n")
    said = re.sub(r"^.*ERROR: *", "", _first_line_of_psql(ctx, db, "-f", str(invalid_utf8)))
    detail(f"PostgreSQL refuses a name with a raw 0xFF byte: {said}")
    owner = q(db, "SELECT min(id) FROM profiles WHERE status = 1 AND plan = 1")
    inserted = ctx.server.script(db, HOSTILE_FILTERS_SQL, {"f": maxf, "o": owner}, log=ctx.logs / "s8-insert.out")
    if inserted.returncode != 0:
        sys.stderr.write((ctx.logs / "s8-insert.out").read_text(errors="replace"))
        raise Fatal("could not write the hostile filters")
    # Out-of-domain profiles (ids MAXP + k): copies of the clean run's most matched profile with one value out
    # of its domain, last logged in when the world's least recent profile did (so that, with larger ids, they
    # rank after every world profile under the per-filter cap and cannot displace one).
    src = q("fault_ref", "SELECT profile_id FROM filter_matches GROUP BY profile_id ORDER BY count(*) DESC, profile_id LIMIT 1")
    oldest = q(db, "SET TIME ZONE 'UTC'; SELECT min(last_login_at) FROM profiles")
    cols = q(db, """SELECT string_agg(column_name, ', ' ORDER BY ordinal_position) FROM information_schema.columns
                     WHERE table_name = 'profiles' AND column_name NOT IN ('id', 'last_login_at', 'updated_at')""")
    q(db, "CREATE TABLE fault_hostile_profiles (k int, item text, col text, value text)", HOSTILE_PROFILES)
    for line in q(db, "SELECT k, col, value FROM fault_hostile_profiles ORDER BY k").splitlines():
        k, col, value = line.split("|", 2)
        q(db, f"""INSERT INTO profiles (id, last_login_at, updated_at, {cols})
                SELECT {maxp} + {k}, timestamptz '{oldest}', timestamptz '{cfg.now}', {cols} FROM profiles WHERE id = {src}""",
          f"UPDATE profiles SET {col} = '{value}' WHERE id = {maxp} + {k}")
    run = ctx.m("s8", db, *cfg.run_args)
    stderr = (ctx.logs / "s8.err").read_bytes()
    longest_line = max((len(l) for l in stderr.decode(errors="replace").splitlines()), default=0)
    detail(f"run exit {run.rc} in {run.dur}s; its stderr is {len(stderr)} bytes, longest line {longest_line} characters")
    # Each hostile filter: recorded with the expected key (or not recorded when valid), never matched.
    keys = q(db, """SELECT count(*) FROM fault_hostile_expect e LEFT JOIN matcher_invalid_filters i ON i.filter_id = e.filter_id
                     WHERE CASE e.expect WHEN 'valid' THEN i.filter_id IS NOT NULL
                                         WHEN '-' THEN i.filter_id IS NULL OR i.item_key IS NOT NULL
                                         ELSE i.item_key IS DISTINCT FROM e.expect END""")
    for line in q(db, f"""SELECT format('%s  %-28s %s', i.filter_id, coalesce(i.item_key, '(document)'),
                            left(regexp_replace(i.reason, '\\s+', ' ', 'g'), 90))
              FROM matcher_invalid_filters i WHERE i.filter_id > {maxf} ORDER BY i.filter_id""").splitlines():
        detail(f"  {line}")
    longest = q(db, "SELECT max(length(reason)) FROM matcher_invalid_filters")
    invalid_rows = q(db, "SELECT count(*) FROM filter_matches m JOIN fault_hostile_expect e ON e.filter_id = m.filter_id AND e.expect <> 'valid'")
    world_invalid = q(db, f"SELECT string_agg(filter_id || ':' || reason, ',' ORDER BY filter_id) FROM matcher_invalid_filters WHERE filter_id <= {maxf}")
    world_invalid_ref = q("fault_ref", "SELECT string_agg(filter_id || ':' || reason, ',' ORDER BY filter_id) FROM matcher_invalid_filters")
    twin = q(db, f"""SELECT count(*) FROM (SELECT profile_id, matched_at FROM filter_matches WHERE filter_id = {maxf} + 3
                      EXCEPT ALL SELECT profile_id, matched_at FROM filter_matches WHERE filter_id = {maxf} + 4) a""")
    twin2 = q(db, f"""SELECT count(*) FROM (SELECT profile_id, matched_at FROM filter_matches WHERE filter_id = {maxf} + 4
                      EXCEPT ALL SELECT profile_id, matched_at FROM filter_matches WHERE filter_id = {maxf} + 3) a""")
    twin_n = q(db, f"SELECT count(*) FROM filter_matches WHERE filter_id = {maxf} + 3")
    # Each out-of-domain profile: never matched through a condition on its out-of-domain item that it does
    # not satisfy by the spec's rules (a code list never holds an out-of-domain code; a range is min <= v <= max
    # with an absent bound not checked; a paid item's condition is ignored for a free owner); status 9 never.
    violations = q(db, f"""
    SELECT count(*) FROM filter_matches m
    JOIN fault_hostile_profiles h ON m.profile_id = {maxp} + h.k
    JOIN saved_filters f ON f.id = m.filter_id JOIN profiles o ON o.id = f.owner_id JOIN profiles p ON p.id = m.profile_id
    WHERE h.item = 'status'
       OR (h.item IN ('residence', 'gender', 'personality', 'smoking') AND f.conditions ? h.item)
       OR (h.item = 'communities' AND f.conditions ? 'communities' AND o.plan >= 1)
       OR (h.item IN ('height', 'income', 'age') AND f.conditions ? h.item AND NOT (
             (SELECT v FROM (VALUES (CASE h.item WHEN 'height' THEN p.height_cm::numeric WHEN 'income' THEN p.income_band::numeric
                      ELSE date_part('year', age(date (timestamptz '{cfg.now}' AT TIME ZONE 'Asia/Tokyo'), p.birth_date))::numeric END)) x(v))
             BETWEEN coalesce((f.conditions -> h.item ->> 'min')::numeric, -1e9) AND coalesce((f.conditions -> h.item ->> 'max')::numeric, 1e9)))""")
    for line in q(db, f"""SELECT format('profile %s (%s = %s): %s matches, %s of them through a condition on %s',
                            {maxp} + h.k, h.col, h.value, count(m.filter_id),
                            count(m.filter_id) FILTER (WHERE f.conditions ? h.item), h.item)
              FROM fault_hostile_profiles h LEFT JOIN filter_matches m ON m.profile_id = {maxp} + h.k
              LEFT JOIN saved_filters f ON f.id = m.filter_id GROUP BY h.k, h.col, h.value, h.item ORDER BY h.k""").splitlines():
        detail(f"  {line}")
    hostile_matched = q(db, f"SELECT count(DISTINCT profile_id) FROM filter_matches WHERE profile_id > {maxp}")
    tables = q(db, "SELECT count(*) FROM pg_tables WHERE tablename IN ('profiles', 'saved_filters', 'filter_matches')")
    # The world's rows, without the hostile profiles (taken out of the digests too), against the clean run.
    restricted = ctx.checks.sig(db, maxf, maxp)
    bad = ctx.checks.bad_digests(db)
    detail(f"hostile filters with a wrong/missing record: {keys}; rows of invalid filters: {invalid_rows}; longest "
           f"reason: {longest} characters")
    detail(f"world's invalid filters as in the clean run: {'yes' if world_invalid == world_invalid_ref else 'NO'}")
    detail(f"15000-element list = its one-element twin: {'yes' if twin == '0' and twin2 == '0' else 'NO'} "
           f"({twin_n} matches each)")
    detail(f"out-of-domain profiles: {hostile_matched} of 10 matched something; matches contradicting the spec: "
           f"{violations}")
    detail(f"world filters × world profiles (hostile profiles taken out of digests): {restricted}")
    detail(f"clean run of the world without hostile rows:                           {ctx.ref_sig}")
    detail(f"inconsistent digests: {bad}; tables intact: {tables}/3")
    held = (run.rc == 0 and keys == "0" and invalid_rows == "0" and int(longest or 0) < 300
            and world_invalid == world_invalid_ref and twin == "0" and twin2 == "0" and int(twin_n or 0) > 0
            and violations == "0" and int(hostile_matched or 0) > 0 and restricted == ctx.ref_sig and bad == "0"
            and tables == "3")
    recorded = q(db, "SELECT count(*) FROM fault_hostile_expect WHERE expect <> 'valid'")
    ctx.record("8 hostile input", f"exit {run.rc}; {recorded} invalid filters recorded with their keys; world rows "
               "unchanged", held, t)


SCENARIOS = {"8": hostile_input}
