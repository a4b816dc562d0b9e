-- Whether a running item only waits (for a provider's concurrency slot,
-- core.WaitMarker): a claim that takes such an item back does not count
-- an interruption against it (the poison-message guard), and every claim
-- clears it.
ALTER TABLE queue ADD COLUMN waiting INTEGER NOT NULL DEFAULT 0;
