-- Dreaming's candidate pool and run ledger belong to the consolidator's schema
-- (consolidator.candidate_memory, consolidator.dream_run): services never share tables, and
-- nothing in the ledger reads or writes these two. They were created empty by 002.

DROP TABLE IF EXISTS ledger.candidate_memory;
DROP TABLE IF EXISTS ledger.dream_run;
