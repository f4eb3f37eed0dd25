-- migrate:up
CREATE TABLE folders (
    id uuid PRIMARY KEY,
    name text NOT NULL UNIQUE
);
CREATE TABLE notes (
    id uuid PRIMARY KEY,
    folder_id uuid NOT NULL REFERENCES folders (id) ON DELETE CASCADE,
    title text NOT NULL CHECK (title <> ''),
    body text NOT NULL DEFAULT '',
    row_version bigint NOT NULL DEFAULT 1
);
CREATE INDEX notes_by_folder ON notes (folder_id, title);

-- migrate:down
DROP TABLE notes;
DROP TABLE folders;
