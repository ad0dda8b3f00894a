-- Hostile rows (issue 14). A profile or saved filter that the worker cannot read
-- at all is left out of the run and listed here for operators, one row per
-- (kind, row_id): the latest reason and run, and when it was first seen with
-- that reason. An entry is removed when a later run reads the row fine.
-- Rows read with odd values (NULL array elements, infinite dates, codes outside
-- their domain, unknown status, ...) are read totally and only counted.

CREATE TABLE IF NOT EXISTS matcher_quarantine (
    kind        text NOT NULL CHECK (kind IN ('profile', 'filter')),
    row_id      bigint NOT NULL,
    reason      text NOT NULL,
    run_id      bigint,
    detected_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (kind, row_id)
);

-- The run's counts of what it read (RunCounters): see runs.md "Eligibility".
ALTER TABLE matcher_runs
    ADD COLUMN IF NOT EXISTS profiles_quarantined integer NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS filters_quarantined  integer NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS odd_values           integer NOT NULL DEFAULT 0;
