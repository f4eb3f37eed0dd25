-- Comments on tickets, each by a person: a ticket's comments go with it (ON DELETE CASCADE); a person who
-- wrote comments cannot be deleted (the default, NO ACTION).
-- migrate:up
CREATE TABLE people (
    name text PRIMARY KEY
);
CREATE TABLE comments (
    id uuid PRIMARY KEY,
    ticket_id uuid NOT NULL REFERENCES tickets (id) ON DELETE CASCADE,
    author_name text NOT NULL REFERENCES people (name),
    body text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX comments_by_ticket ON comments (ticket_id);

-- migrate:down
DROP TABLE comments;
DROP TABLE people;
