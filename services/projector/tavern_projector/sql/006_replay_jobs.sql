-- Replays asked over the bus (`tavern.rpc.projector.replay.start`): one row per job with its
-- progress, so whichever replica answers `replay.status` reads the same figures.
CREATE TABLE projector.replay_jobs (
    job_id      text PRIMARY KEY,
    projection  text NOT NULL,
    session_id  text,
    from_archive boolean NOT NULL DEFAULT false,
    state       text NOT NULL CHECK (state IN ('running', 'done', 'failed')),
    total       bigint NOT NULL DEFAULT 0,
    done        bigint NOT NULL DEFAULT 0,
    entries     bigint NOT NULL DEFAULT 0,
    error       text,
    asked_by    text NOT NULL,
    started_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
