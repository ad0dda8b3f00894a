-- The change-capture trigger runs with its owner's rights, so that the app's role
-- needs no privilege on the worker's matcher_profile_changes to write profiles.
-- search_path is pinned so that the definer's rights cannot be borrowed through
-- objects planted in another schema.
ALTER FUNCTION matcher_record_profile_changes() SECURITY DEFINER;
ALTER FUNCTION matcher_record_profile_changes() SET search_path = pg_catalog, public;
REVOKE ALL ON FUNCTION matcher_record_profile_changes() FROM PUBLIC;
