-- A match a digest passed over (it no longer qualified at the digest's clock) is read again by every
-- later digest of its filter, in case it qualifies again. Until this migration it stayed listed until the
-- retention (180 days by default), so a filter's passed-over matches piled up for half a year and each digest
-- day read them all, with their profiles: a cost that followed the service's age, not the day's work. Now
-- it may come back for Retention.comebackDays (30) after it was recorded; then the retention sweep takes its
-- entry off the list (its pair stays recorded until the retention, so it does not match again), through this
-- index: only passed-over entries, oldest first, so a sweep never reads the entries that still wait.
CREATE INDEX IF NOT EXISTS matcher_waiting_matches_passed_over
    ON matcher_waiting_matches (matched_at) WHERE passed_over;
