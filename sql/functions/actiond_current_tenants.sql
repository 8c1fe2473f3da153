-- The tenants set for the current transaction: set_config('actiond.tenant_ids', '<id>,…', true)
-- (SET LOCAL, so a pooled connection never carries a tenant into the next request). NULLIF(…, '')
-- so an unset or reset setting means no tenant at all.
CREATE OR REPLACE FUNCTION actiond_current_tenants()
 RETURNS text[]
 LANGUAGE sql
 STABLE
AS $function$
    SELECT string_to_array(NULLIF(current_setting('actiond.tenant_ids', true), ''), ',')
$function$;
