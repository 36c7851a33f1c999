-- Evidence copies are timed when they were said (evidence/appended carries observed_at), so the
-- watermark is the latest *observed* time of the last batch. A copy that arrives after a batch
-- with an older time (a chat imported later, a second session said in parallel) would fall
-- behind it: what a batch digested is marked on the copy instead, and the undigested set is the
-- unmarked active, digestible copies. Copies at or before today's watermark were digested.
ALTER TABLE consolidator.evidence ADD COLUMN digested_at timestamptz;
UPDATE consolidator.evidence e SET digested_at = now()
  FROM consolidator.scope_state s
 WHERE e.scope_id = s.scope_id AND s.watermark_at IS NOT NULL
   AND (e.observed_at, e.id) <= (s.watermark_at, s.watermark_id);
DROP INDEX consolidator.evidence_undigested;
CREATE INDEX evidence_undigested ON consolidator.evidence (scope_id, observed_at, id)
    WHERE state = 'active' AND digestible AND digested_at IS NULL;
