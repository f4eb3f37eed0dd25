-- migrate:no-transaction
-- CREATE INDEX CONCURRENTLY cannot run inside a transaction. If it fails midway it leaves an INVALID
-- index behind; IF NOT EXISTS would then skip it, so the statement drops a leftover first.
-- migrate:up
DROP INDEX CONCURRENTLY IF EXISTS books_title;
CREATE INDEX CONCURRENTLY books_title ON books (lower(title));

-- migrate:down
DROP INDEX CONCURRENTLY IF EXISTS books_title;
