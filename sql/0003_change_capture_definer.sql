-- The change-capture trigger runs with its owner's rights, so that the app's role
-- needs no privilege on the worker's matcher_profile_changes to write profiles.
-- search_path is pinned so that the definer's rights cannot be borrowed through
-- objects planted in another schema: pg_catalog, then the schema the worker's tables
-- are in (the first of the migration's search_path, as for every other statement here).
-- Not `public` by name: in another schema the function would no longer find its table,
-- and every write to profiles would fail until migration 5 replaced it.
ALTER FUNCTION matcher_record_profile_changes() SECURITY DEFINER;
DO $pin$
BEGIN
    EXECUTE pg_catalog.format(
        'ALTER FUNCTION matcher_record_profile_changes() SET search_path = pg_catalog, %I',
        pg_catalog.current_schema());
END
$pin$;
REVOKE ALL ON FUNCTION matcher_record_profile_changes() FROM PUBLIC;
