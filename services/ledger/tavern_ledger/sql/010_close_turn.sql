-- A turn's end in one statement: the stores' consumer called BEGIN, the turn lock, the close and
-- the drop, COMMIT (five round trips per turn). As a function it is one call, atomic on its own
-- or inside the consumer's batch transaction. Each statement of a VOLATILE plpgsql function
-- takes a new snapshot, so the drop, which runs after the lock is held, sees every turn-scope
-- variable a writer committed while it held the lock (a single CTE would not: its snapshot is
-- taken before the lock is granted).
CREATE FUNCTION ledger.close_turn(p_session text, p_turn integer)
RETURNS void LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('ledger-turn:' || p_session));
    INSERT INTO ledger.turn_closed (session_id, last_ended_turn) VALUES (p_session, p_turn)
    ON CONFLICT (session_id) DO UPDATE
    SET last_ended_turn = GREATEST(ledger.turn_closed.last_ended_turn, EXCLUDED.last_ended_turn);
    DELETE FROM ledger.variable_scope WHERE scope = 'turn' AND scope_id = p_session
                                        AND turn <= p_turn;
END
$$;
COMMENT ON FUNCTION ledger.close_turn IS
    'Record a session''s turn end and drop its turn-scope variables of that turn or earlier, '
    'under the turn lock that turn-scope writes take (tavern_ledger.scopes.bindings).';
