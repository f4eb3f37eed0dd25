-- migrate:up
CREATE TABLE tickets (
    id uuid PRIMARY KEY,
    title text NOT NULL,
    status text NOT NULL DEFAULT 'open',
    priority integer NOT NULL DEFAULT 0,
    row_version bigint NOT NULL DEFAULT 1
);
CREATE INDEX tickets_open_by_priority ON tickets (priority DESC) WHERE status = 'open';

-- migrate:down
DROP TABLE tickets;
