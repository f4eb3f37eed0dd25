-- migrate:up
CREATE TABLE books (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    title        text NOT NULL,
    author_id    uuid NOT NULL REFERENCES authors (id) ON DELETE CASCADE,
    year         integer CHECK (year BETWEEN 0 AND 9999),
    price        numeric(10, 2) CHECK (price >= 0),
    tags         text[] NOT NULL DEFAULT '{}',
    published_at timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX books_author_id ON books (author_id);

-- migrate:down
DROP TABLE books;
