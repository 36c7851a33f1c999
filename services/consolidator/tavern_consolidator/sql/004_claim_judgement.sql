-- Claims of fact a model may judge (`judge.py`): what each copy is as a claim, who said it, and
-- whether it still awaits the model's judgement (set at intake while judging is on; cleared once
-- judged, or when ingestion already used the claim to supersede something).
ALTER TABLE consolidator.evidence
    ADD COLUMN claim_kind text,
    ADD COLUMN claim_of text,
    ADD COLUMN speaker text NOT NULL DEFAULT '',
    ADD COLUMN judge_pending boolean NOT NULL DEFAULT false;
CREATE INDEX evidence_judge_pending ON consolidator.evidence (scope_id, observed_at, id)
    WHERE judge_pending;
CREATE INDEX evidence_claims_of_fact ON consolidator.evidence (scope_id, speaker, observed_at)
    WHERE state = 'active' AND claim_kind IN ('fact', 'preference', 'correction');
