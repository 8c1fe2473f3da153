-- The predicate of every tenant row-level security policy: the row's tenant is one of the
-- transaction's tenants (actiond_current_tenants()), or allow_all for roles that serve every
-- tenant (policy, executor, the sealer).
CREATE OR REPLACE FUNCTION actiond_tenant_visible(tenant text, allow_all boolean DEFAULT false)
 RETURNS boolean
 LANGUAGE sql
 STABLE
AS $function$
    SELECT tenant = ANY (actiond_current_tenants())
        OR (allow_all AND '*' = ANY (actiond_current_tenants()))
$function$;
