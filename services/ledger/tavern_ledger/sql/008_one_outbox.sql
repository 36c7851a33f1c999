-- One outbox: memory and variable facts go through ledger.outbox and its relay, like every other
-- LEDGER fact. Facts still staged in the stores' outbox move over in the order they were staged
-- (their ids are kept, so a fact already published is stored once on the stream).
INSERT INTO ledger.outbox (msg_id, subject, body, created_at)
SELECT msg_id, subject, data, created_at FROM ledger.store_outbox ORDER BY created_at, msg_id;

DROP TABLE ledger.store_outbox;
