-- The comeback of a match a digest passed over counts from the decision that passed it over (its unit's clock,
-- passed_over_at), not from the match's recording as in 0016: a match first passed over a month or more after
-- it was recorded (a filter notified monthly, an owner hidden for weeks, a notification pause) had no comeback
-- at all. Readers and the retention sweep take coalesce(passed_over_at, matched_at): an entry marked by a
-- binary older than this migration (during a rollout) falls back to its recording, as under 0016, and the
-- sweep still finds it.
--
-- Entries passed over before this migration have no decision time: they take the migration's, so each gets
-- its whole comeback from the upgrade on. The index replaces 0016's: only passed-over entries, oldest decision
-- first, so a sweep never reads the entries that still wait. (It reads passed_over, so marking an entry passed
-- over is not an in-place update; a few thousand entries a day at 200k x 20k.)
ALTER TABLE matcher_waiting_matches ADD COLUMN IF NOT EXISTS passed_over_at timestamptz;
UPDATE matcher_waiting_matches SET passed_over_at = now() WHERE passed_over AND passed_over_at IS NULL;
DROP INDEX IF EXISTS matcher_waiting_matches_passed_over;
CREATE INDEX IF NOT EXISTS matcher_waiting_matches_passed_over_at
    ON matcher_waiting_matches ((coalesce(passed_over_at, matched_at))) WHERE passed_over;
