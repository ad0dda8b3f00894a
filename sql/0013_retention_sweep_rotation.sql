-- The retention sweep lists the newest expired clocks first (the runs that
-- have just expired), at most a few hundred a run. Older expired clocks hold
-- only matches that still wait for their digest; each sweep checks a window of
-- them again, from where the previous one stopped, so that every clock is
-- visited every few runs and a match that stops waiting is forgotten, however
-- many such clocks there are (an hourly timer with monthly digests, a long
-- notification pause). Before this, the sweep listed the oldest clocks first
-- and, past a thousand clocks that still held waiting matches, never reached
-- the runs that had just expired.
ALTER TABLE matcher_service_state ADD COLUMN IF NOT EXISTS retention_sweep_after timestamptz;
