-- Service-wide switches an operator flips, in one row. For now: a pause of
-- notifications (a push outage) while matching goes on. `matcher notifications
-- pause --reason TEXT` sets notifications_paused_at (kept if already paused),
-- `matcher notifications resume` clears it; runs read it before deciding
-- notifications (ServiceStateRepository.notificationsPaused()).
CREATE TABLE matcher_service_state (
    singleton               boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    notifications_paused_at timestamptz,
    paused_by               text,
    reason                  text,
    updated_at              timestamptz NOT NULL DEFAULT now(),
    CHECK ((notifications_paused_at IS NULL) = (paused_by IS NULL AND reason IS NULL))
);

INSERT INTO matcher_service_state (singleton) VALUES (true);
