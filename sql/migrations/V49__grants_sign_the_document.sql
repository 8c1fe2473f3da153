-- V49: a grant signs the tenant document it was decided under, not only its version number.
--
-- `grants.doc_sha256` holds the SHA-256 (lowercase hex) of the source text of document version
-- `doc_version`, as the decision read it: the policy worker's compiled document for its allow,
-- the proposal's `doc_sha256` (which policy wrote with the escalation) for a person's or an
-- operator's approval. It is inside the signed claims (`GrantClaims::doc_sha256`), so it cannot
-- be changed or removed without breaking the signature, and the executor refuses to run a
-- grant whose document version's stored source no longer hashes to it (`grant.rejected`,
-- reason `document_changed`, the proposal ends `blocked`). Before, the grant signed the version
-- number alone and the executor read that version's handler settings from `tenant_documents`:
-- whoever could write that table (the database owner) could change where an approved action
-- went after its grant was signed.
--
-- NULL for grants issued before this migration (their signatures do not cover a document
-- hash, and they expire within their handler's grant lifetime); every issuer fills it from
-- now on. Adding a nullable column rewrites nothing.

ALTER TABLE grants
    ADD COLUMN doc_sha256 text
        CONSTRAINT grants_doc_sha256_check CHECK (doc_sha256 IS NULL OR (length(doc_sha256) = 64 AND doc_sha256 !~ '[^0-9a-f]'));
