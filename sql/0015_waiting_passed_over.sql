-- Which listed matches a digest decision passed over, entry by entry. Migration
-- 0014 told it by clocks (a decision at or after the match's clock), which is
-- wrong for a match listed after a decision with a later clock by a writer with
-- an earlier one (a run beside a `backfill --notify`, a run resumed at its old
-- clock): that match counted as passed over, and could be forgotten before any
-- digest had seen it. Now a decision (a digest written, or held back because
-- none still qualified) sets `passed_over` on the entries it read and did not
-- count, under its filter's lock; an entry listed after it waits until a
-- decision reads it. The entries listed so far take the clock rule's answer
-- once, here, and the filter-level time it needed goes.
ALTER TABLE matcher_waiting_matches ADD COLUMN IF NOT EXISTS passed_over boolean NOT NULL DEFAULT false;
UPDATE matcher_waiting_matches w SET passed_over = true
  FROM matcher_filter_state s
 WHERE s.filter_id = w.filter_id
   AND (s.last_notified_at >= w.matched_at OR s.passed_over_at >= w.matched_at);
ALTER TABLE matcher_filter_state DROP COLUMN IF EXISTS passed_over_at;
