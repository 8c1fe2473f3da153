//! `actiond policy`: the worker run by the one service start-up ([`actiond_runtime::Service`]).

use crate::worker::work_loop;
use crate::{Classifiers, PolicyArgs, PolicyMetrics, Worker};
use actiond_core::grant::GrantSigner;
use actiond_runtime::credentials::CredentialsDir;
use actiond_store::Db;
use actiond_store::listen::{CHANNEL_PENDING, spawn_listener};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// Loads the grant-signing key from the credentials directory (`grant_signing_key`).
pub fn load_signer(dir: Option<&std::path::Path>, key_id: &str) -> anyhow::Result<GrantSigner> {
    let creds = CredentialsDir::resolve(dir)?;
    let text = creds.read("grant_signing_key")?;
    Ok(GrantSigner::from_pkcs8_b64(key_id, &text)?)
}

/// Runs `actiond policy` until SIGINT/SIGTERM. Work in flight finishes its transaction.
pub async fn run(args: PolicyArgs) -> anyhow::Result<()> {
    if !args.key_id.starts_with("policy-") {
        anyhow::bail!("--key-id must start with policy- (got {:?})", args.key_id);
    }
    let signer = load_signer(args.credentials_dir.as_deref(), &args.key_id)?;
    let classifiers = Classifiers::parse(&args.classifiers)?;
    let db = Db::connect_generic(&args.database_url, args.pool_size)?;
    let service = actiond_runtime::Service::new("policy").admin(args.admin_listen);
    let worker = Arc::new(Worker::new(
        db.clone(),
        signer,
        PolicyMetrics::new(service.metrics()),
        args.batch.clamp(1, 1000),
        Duration::from_millis(args.eval_budget_ms.max(1)),
        classifiers.clone(),
    ));
    let ready_db = db.clone();
    let w = worker.clone();
    let running = service
        .ready(move || {
            let db = ready_db.clone();
            async move { db.readiness().await }
        })
        .on_scrape(move || {
            let w = w.clone();
            async move { w.refresh_gauges().await }
        })
        .start()
        .await?;
    let admin = running
        .admin_addr()
        .map_or_else(String::new, |a| a.to_string());
    tracing::info!(admin = %admin, key_id = %args.key_id, classifiers = ?classifiers.names(), "actiond policy started");
    let poll = Duration::from_millis(args.poll_ms.max(10));
    let sweep_every = Duration::from_millis(args.sweep_ms.max(100));
    running
        .run_worker(|stop| async move {
            let wake = Arc::new(Notify::new());
            let listener = spawn_listener(&db, CHANNEL_PENDING, wake.clone());
            // Several claim loops per process: each holds one short transaction at a time, and
            // SKIP LOCKED keeps them off each other's rows. Loop 0 also runs the expiry sweep.
            let loops: Vec<_> = (0..args.concurrency.max(1))
                .map(|i| {
                    tokio::spawn(work_loop(
                        worker.clone(),
                        wake.clone(),
                        stop.receiver(),
                        poll,
                        (i == 0).then_some(sweep_every),
                    ))
                })
                .collect();
            for l in loops {
                let _ = l.await;
            }
            listener.abort();
            Ok(())
        })
        .await
}
