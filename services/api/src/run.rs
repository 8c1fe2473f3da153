//! `actiond api`: the routes served by the one service start-up ([`actiond_runtime::Service`]).

use crate::{ApiArgs, AppState, jwt, mcp, resource, router_with_mcp};
use actiond_store::Db;
use actiond_store::agent_cache::AgentCache;
use std::time::Duration;

/// Runs `actiond api` until SIGINT/SIGTERM.
pub async fn run(args: ApiArgs) -> anyhow::Result<()> {
    let mcp_config =
        mcp::McpConfig::from_public_origins(&args.public_origins).map_err(anyhow::Error::msg)?;
    let verifier = match &args.jwt_issuers_file {
        None => None,
        Some(path) => Some(
            jwt::Verifier::new(jwt::config::IssuersConfig::from_file(path)?)
                .map_err(anyhow::Error::msg)?,
        ),
    };
    let db = Db::connect_generic(&args.database_url, args.pool_size)?;
    let ready_db = db.clone();
    let service = actiond_runtime::Service::new("api")
        .admin(args.admin_listen)
        .ready(move || {
            let db = ready_db.clone();
            async move { db.readiness().await }
        });
    let mut state = AppState::new(db.clone(), service.metrics())
        .with_submit_workers(args.submit_workers)
        .with_public_origin(resource::public_origin(&args.public_origins))
        .with_max_waits_per_agent(args.max_waits_per_agent as usize)
        .with_agent_cache(AgentCache::spawn(
            &db,
            Duration::from_millis(args.agent_cache_ms),
        ));
    if let Some(v) = verifier {
        state = state.with_jwt(v);
    }
    let running = service.start().await?;
    let listener = actiond_runtime::http::bind("http", args.listen).await?;
    let admin = running
        .admin_addr()
        .map_or_else(String::new, |a| a.to_string());
    tracing::info!(listen = %listener.local_addr()?, admin = %admin, "actiond api listening");
    running
        .serve_http(
            listener,
            router_with_mcp(state, &mcp_config),
            (&args.edge).into(),
        )
        .await
}
