-- Digests users can trust (issue 13): the run's counts of what its digests did (RunCounters).
--   filters_suspended  filters whose every condition is paid while the owner lacks the plan:
--                      they match nothing and send nothing (filter-language.md)
--   digests_held_back  digests due whose waiting matches no longer qualified: none written
--   matches_mutual     new matches recorded as mutual (runs.md "Mutual matches")
ALTER TABLE matcher_runs
    ADD COLUMN IF NOT EXISTS filters_suspended integer NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS digests_held_back integer NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS matches_mutual    integer NOT NULL DEFAULT 0;
