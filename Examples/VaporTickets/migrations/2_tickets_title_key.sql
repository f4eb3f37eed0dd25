-- A ticket's title is unique: a second POST with the same title answers 409, and exactly one row exists.
-- migrate:up
ALTER TABLE tickets ADD CONSTRAINT tickets_title_key UNIQUE (title);

-- migrate:down
ALTER TABLE tickets DROP CONSTRAINT tickets_title_key;
