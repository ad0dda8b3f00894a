-- A digest held back (its filter was due, and none of its waiting matches
-- still qualified) passes those matches over, as a digest written without them
-- does: `passed_over_at` is the clock of the filter's latest such decision.
-- Before this, a filter whose only waiting matches could never qualify again
-- (a profile aged out of the filter's range, say) kept them for ever (the
-- retention sweep counted them as waiting), and `matcher status` reported them
-- as waiting, which made MatcherDigestsWaitingTooLong fire for good. They are
-- still read by the filter's next digests, which show any that qualify again,
-- until the retention forgets them.
ALTER TABLE matcher_filter_state ADD COLUMN IF NOT EXISTS passed_over_at timestamptz;
