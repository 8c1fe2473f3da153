//! `actiond executor`: the worker run by the one service start-up ([`actiond_runtime::Service`]).

use crate::{ExecutorArgs, ExecutorMetrics, Worker, effects, previews};
use actiond_store::Db;
use actiond_store::listen::{CHANNEL_APPROVED, spawn_listener};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, Semaphore};

/// Runs `actiond executor` until SIGINT/SIGTERM; running handlers finish first.
pub async fn run(args: ExecutorArgs) -> anyhow::Result<()> {
    let db = Db::connect_generic(&args.database_url, args.pool_size)?;
    let service = actiond_runtime::Service::new("executor").admin(args.admin_listen);
    let worker = Arc::new(Worker::from_args(
        db.clone(),
        &args,
        ExecutorMetrics::new(service.metrics()),
    )?);
    let ready_db = db.clone();
    // The admin listener outlives the drain (running handlers finish first), so `/readyz`
    // answers 503 until the process exits instead of refusing connections.
    let running = service
        .ready(move || {
            let db = ready_db.clone();
            async move { db.readiness().await }
        })
        .start()
        .await?;
    let admin = running
        .admin_addr()
        .map_or_else(String::new, |a| a.to_string());
    tracing::info!(admin = %admin, id = worker.id(), trusted_keys = ?worker.trusted_key_ids(), "actiond executor started");
    running
        .run_worker(|stop| work(db, worker, args, stop.receiver()))
        .await
}

/// The executor's claim loop until `stop_rx` turns true; then running handlers finish first.
async fn work(
    db: Db,
    worker: Arc<Worker>,
    args: ExecutorArgs,
    mut stop_rx: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let wake = Arc::new(Notify::new());
    let listener = spawn_listener(&db, CHANNEL_APPROVED, wake.clone());
    let preview_task = tokio::spawn(previews::run(
        worker.clone(),
        Duration::from_millis(args.poll_ms.max(10)),
        stop_rx.clone(),
    ));
    let settler = tokio::spawn(effects::run_settler(
        worker.clone(),
        Duration::from_millis(args.settle_after_ms),
        Duration::from_millis(args.sweep_ms.max(100)),
        stop_rx.clone(),
    ));
    let slots = Arc::new(Semaphore::new(args.concurrency.max(1)));
    let poll = Duration::from_millis(args.poll_ms.max(10));
    let sweep_every = Duration::from_millis(args.sweep_ms.max(100));
    let mut last_sweep = tokio::time::Instant::now() - sweep_every;
    let mut backoff = Duration::from_millis(100);
    loop {
        if *stop_rx.borrow() {
            break;
        }
        if last_sweep.elapsed() >= sweep_every {
            last_sweep = tokio::time::Instant::now();
            if let Err(e) = worker.sweep().await {
                tracing::warn!(error = %e, "sweep failed");
            }
        }
        let free = slots.available_permits() as i64;
        if free == 0 {
            tokio::select! {
                _ = slots.acquire() => {},
                _ = stop_rx.changed() => {},
            }
            continue;
        }
        // One batch at a time is claimed; its checks, spend and commit go on in its own task
        // while the next batch is claimed (the count comes back once the claim returned and the
        // batch holds its slots).
        let (claimed_tx, claimed_rx) = tokio::sync::oneshot::channel();
        tokio::spawn(worker.clone().run_batch(
            free.min(args.batch.max(1)),
            slots.clone(),
            claimed_tx,
        ));
        match claimed_rx.await {
            Ok(Ok(n)) if n > 0 => {
                backoff = Duration::from_millis(100);
            }
            Ok(Ok(_)) => {
                tokio::select! {
                    () = wake.notified() => {},
                    () = actiond_runtime::clock::sleep(poll) => {},
                    _ = stop_rx.changed() => {},
                }
            }
            failed => {
                let e = match failed {
                    Ok(Err(e)) => e,
                    _ => anyhow::anyhow!("the claiming task ended without an answer"),
                };
                tracing::warn!(error = %e, "claim failed; retrying");
                tokio::select! {
                    () = actiond_runtime::clock::sleep(backoff) => {},
                    _ = stop_rx.changed() => {},
                }
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
    // Let running handlers finish and record their outcomes.
    let _ = slots.acquire_many(args.concurrency.max(1) as u32).await;
    listener.abort();
    let _ = preview_task.await;
    let _ = settler.await;
    Ok(())
}
