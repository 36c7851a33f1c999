-- Sign-in attempts are counted per account and client address in one row, taken and counted
-- in a single statement before the password is verified (an attempt in flight counts), so
-- parallel guesses cannot all pass the check; the window bounds every pause.
DROP TABLE gateway.login_failures;

CREATE TABLE gateway.login_attempts (
    account       text NOT NULL,
    client        text NOT NULL,
    window_start  timestamptz NOT NULL,
    attempts      integer NOT NULL,
    PRIMARY KEY (account, client)
);
CREATE INDEX login_attempts_window ON gateway.login_attempts (window_start);
