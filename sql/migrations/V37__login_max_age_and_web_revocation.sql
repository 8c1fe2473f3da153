-- V37: a step-up sign-in that the identity provider cannot skip, and revocation from the web.
--
-- 1. A login started with OIDC `max_age` (a step-up or a passkey registration asked for a
--    fresh sign-in) remembers it, so the callback can refuse an identity provider that ignored
--    it: `auth_time` must then be present and no older than `max_age_secs` (plus the 60 s clock
--    skew) before the login began (OpenID Connect Core 1.0 §3.1.2.1). NULL: the login asked
--    for no `max_age`. The web role's table-wide INSERT and SELECT on web_login_states cover
--    the new column.
ALTER TABLE web_login_states
    ADD COLUMN max_age_secs bigint CHECK (max_age_secs >= 0);

-- 2. A tenant admin may revoke an agent from the web admin page, by the one store function the
--    CLI uses: the web role may set `agents.revoked_at` (nothing else of `agents` but V14's
--    freeze columns) and write the `agent.revoked` event (V33's list plus that one kind). The
--    web app checks that the person is an admin of the agent's tenant; the revocation's
--    denials are `proposal.decided` events the web role could already write.
GRANT UPDATE (revoked_at) ON agents TO actiond_web;
ALTER POLICY web_write ON audit_events
    WITH CHECK (actiond_tenant_visible(tenant_id, true)
                AND kind IN ('approval.recorded', 'approval.decided', 'approval.refused', 'proposal.expired',
                             'approval.stage_opened', 'approval.stage_completed', 'approval.stage_timed_out',
                             'agent.frozen', 'agent.unfrozen', 'agent.revoked', 'proposal.decided',
                             'passkey.registered', 'passkey.registration_refused'));
