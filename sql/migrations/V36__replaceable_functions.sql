-- Functions and their triggers now live one file each under sql/functions/, applied by the
-- migrator after the migrations when their content changes (services/store/src/sql_objects.rs).
-- This table records the SHA-256 of each file as last applied. Only the migrating owner
-- reads or writes it; no service role has any privilege on it.
CREATE TABLE actiond_sql_objects (
    name       text PRIMARY KEY CHECK (name ~ '^[a-z0-9_]+$'),
    sha256     text NOT NULL CHECK (length(sha256) = 64),
    applied_at timestamptz NOT NULL DEFAULT now()
);
