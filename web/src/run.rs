//! `actiond web`: the routes served by the one service start-up ([`actiond_runtime::Service`]).

use crate::{AppState, WebArgs, notify, router};

/// Runs the web service on `listener` until `shutdown` resolves: the HTTP routes, the
/// escalation notifier, the session sweeper and, when configured, the admin listener.
/// `args.listen` is taken to be the listener's bound address, so the default public URL
/// (`http://<listen>`) names the port actually bound when `--listen` asked for port 0.
pub async fn serve(
    mut args: WebArgs,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    args.listen = listener.local_addr()?;
    let state = AppState::build(&args).await?;
    let db = state.db.clone();
    let running = actiond_runtime::Service::with_metrics("web", state.registry.clone())
        .admin(args.admin_listen)
        .ready(move || {
            let db = db.clone();
            async move { db.readiness().await }
        })
        .until(shutdown)
        .start()
        .await?;
    if let Some(bound) = running.admin_addr() {
        tracing::info!(%bound, "admin listener");
    }
    serve_running(running, state, listener, (&args.edge).into()).await
}

/// The routes, the escalation notifier and the session sweeper of a started service.
async fn serve_running(
    running: actiond_runtime::Running,
    state: AppState,
    listener: tokio::net::TcpListener,
    edge: actiond_runtime::http::Edge,
) -> anyhow::Result<()> {
    let bg = tokio::spawn(notify::background(state.clone()));
    tracing::info!(
        addr = %listener.local_addr()?,
        public_url = %state.public_url,
        oidc = state.oidc.is_some(),
        dev_login = state.dev.is_some(),
        "actiond web listening"
    );
    let served = running
        .serve_http(
            listener,
            actiond_runtime::http::observe(router(state)),
            edge,
        )
        .await;
    bg.abort();
    served
}

/// Serves an already built [`AppState`] on `listener` (with the notifier and session sweeper)
/// until `shutdown` resolves. For embedding (`actiond dev`) and tests.
pub async fn serve_state(
    state: AppState,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    serve_state_with(
        state,
        listener,
        actiond_runtime::http::Edge::default(),
        shutdown,
    )
    .await
}

/// [`serve_state`] with the listener's connection limits (`--http-*` flags).
pub async fn serve_state_with(
    state: AppState,
    listener: tokio::net::TcpListener,
    edge: actiond_runtime::http::Edge,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let running = actiond_runtime::Service::with_metrics("web", state.registry.clone())
        .until(shutdown)
        .start()
        .await?;
    serve_running(running, state, listener, edge).await
}

/// `actiond web`: binds `--listen` and serves until SIGINT/SIGTERM.
pub async fn run(args: WebArgs) -> anyhow::Result<()> {
    actiond_runtime::init_tracing();
    let listener = actiond_runtime::http::bind("http", args.listen).await?;
    serve(args, listener, actiond_runtime::shutdown_signal()).await
}
