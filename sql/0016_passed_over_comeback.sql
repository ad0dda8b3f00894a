-- A match a digest passed over (it no longer qualified at the digest's clock) is read again by every
-- later digest of its filter, in case it qualifies again. Until this migration it stayed listed until the
-- retention (180 days by default), so a filter's passed-over matches piled up for half a year and each digest
-- day read them all, with their profiles: a cost that followed the service's age, not the day's work. Now
-- it may come back for Retention.comebackDays (30) after the decision that passed it over (passed_over_at,
-- that unit's clock); then the retention sweep takes its entry off the list (its pair stays recorded until
-- the retention, so it does not match again), through the partial index below: only passed-over entries,
-- oldest decision first, so a sweep never reads the entries that still wait. (The index reads passed_over,
-- so marking an entry passed over is no longer an in-place update; a few thousand entries a day.)
--
-- Entries passed over before this migration have no decision time: they take the migration's, so each gets
-- its whole comeback from the upgrade on.
ALTER TABLE matcher_waiting_matches ADD COLUMN IF NOT EXISTS passed_over_at timestamptz;
UPDATE matcher_waiting_matches SET passed_over_at = now() WHERE passed_over AND passed_over_at IS NULL;
CREATE INDEX IF NOT EXISTS matcher_waiting_matches_passed_over
    ON matcher_waiting_matches (passed_over_at) WHERE passed_over;
