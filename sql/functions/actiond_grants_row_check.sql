-- The CHECK rules of a grant row (V50: the one CHECK constraint `grants_row_check` calls this on
-- every INSERT and UPDATE of a row). Each rule is one of V1–V49's constraints, tested in their
-- name order, and a refusal is theirs: SQLSTATE 23514, the message
-- `new row for relation "grants" violates check constraint "<name>"`, the error's constraint
-- and table fields set to that name and `grants`. A rule whose test is NULL passes, as in a
-- CHECK constraint. Why a function: see `actiond_proposals_row_check.sql`.
CREATE OR REPLACE FUNCTION actiond_grants_row_check(
    doc_sha256 text, intent_hash text, preview_sha256 text, used_at timestamptz, voided_at timestamptz)
 RETURNS boolean
 LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $function$
DECLARE
    failed text;
BEGIN
    IF (doc_sha256 IS NULL OR (length(doc_sha256) = 64 AND doc_sha256 !~ '[^0-9a-f]')) IS FALSE THEN
        failed := 'grants_doc_sha256_check';
    ELSIF (length(intent_hash) = 64 AND intent_hash !~ '[^0-9a-f]') IS FALSE THEN
        failed := 'grants_intent_hash_check';
    ELSIF (preview_sha256 IS NULL OR (length(preview_sha256) = 64 AND preview_sha256 !~ '[^0-9a-f]')) IS FALSE THEN
        failed := 'grants_preview_sha256_check';
    ELSIF (voided_at IS NULL OR used_at IS NOT NULL) IS FALSE THEN
        failed := 'grants_voided_after_spent';
    ELSE
        RETURN true;
    END IF;
    RAISE EXCEPTION 'new row for relation "grants" violates check constraint "%"', failed
        USING ERRCODE = 'check_violation', CONSTRAINT = failed, TABLE = 'grants';
END $function$;
