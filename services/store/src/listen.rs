//! Wake-ups with LISTEN/NOTIFY on one dedicated connection outside the pool, with reconnect.
//!
//! NOTIFY is only a hint: notifications sent while the connection is down are lost, so after
//! every (re)LISTEN the waker fires once and the worker re-reads its queue; workers also poll on
//! a timer. NOTIFY takes a global lock at commit, so senders debounce ([`Notifier`]).

use crate::Db;
use futures_util::StreamExt;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio_postgres::AsyncMessage;

/// Channel the API notifies after submissions (policy listens).
pub const CHANNEL_PENDING: &str = "actiond_pending";
/// Channel the policy and approvers notify after approvals (executor listens).
pub const CHANNEL_APPROVED: &str = "actiond_approved";

/// Spawns a task that LISTENs on `channel` forever and calls `notify_one` on `wake` for every
/// notification and after every (re)subscription.
pub fn spawn_listener(
    db: &Db,
    channel: &'static str,
    wake: Arc<Notify>,
) -> tokio::task::JoinHandle<()> {
    let cfg = db.config().clone();
    let tls = db.tls().clone();
    tokio::spawn(async move {
        let mut backoff = Duration::from_millis(100);
        loop {
            let (client, mut conn) = match cfg.connect(tls.clone()).await {
                Ok(x) => {
                    backoff = Duration::from_millis(100);
                    x
                }
                Err(e) => {
                    tracing::warn!(error = %e, channel, "LISTEN connection failed; retrying");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(10));
                    continue;
                }
            };
            let w = wake.clone();
            let driver = tokio::spawn(async move {
                let mut msgs = futures_util::stream::poll_fn(move |cx| conn.poll_message(cx));
                while let Some(m) = msgs.next().await {
                    match m {
                        Ok(AsyncMessage::Notification(_)) => w.notify_one(),
                        Ok(_) => {}
                        Err(e) => {
                            tracing::warn!(error = %e, "LISTEN connection lost");
                            return;
                        }
                    }
                }
            });
            if client
                .batch_execute(&format!("LISTEN {channel}"))
                .await
                .is_ok()
            {
                // Re-read the queue: notifications during the gap were lost.
                wake.notify_one();
            }
            let _ = driver.await;
            tokio::time::sleep(backoff).await;
        }
    })
}

/// A debounced NOTIFY sender: [`Notifier::hint`] is cheap and coalesces; at most one NOTIFY per
/// `interval` is sent from a background task on a pooled connection.
#[derive(Clone)]
pub struct Notifier {
    flag: Arc<Notify>,
}

impl Notifier {
    /// Starts the sender task for `channel`.
    pub fn spawn(db: Db, channel: &'static str, interval: Duration) -> Self {
        let flag = Arc::new(Notify::new());
        let f = flag.clone();
        tokio::spawn(async move {
            loop {
                f.notified().await;
                match db.client().await {
                    Ok(c) => {
                        if let Err(e) = c.execute("SELECT pg_notify($1, '')", &[&channel]).await {
                            tracing::debug!(error = %e, "NOTIFY failed; pollers will catch up");
                        }
                    }
                    Err(e) => tracing::debug!(error = %e, "NOTIFY skipped; pollers will catch up"),
                }
                tokio::time::sleep(interval).await;
            }
        });
        Self { flag }
    }
    /// Requests a NOTIFY soon.
    pub fn hint(&self) {
        self.flag.notify_one();
    }
}

/// Sends one NOTIFY on `channel` now (a wake-up hint; listeners also poll).
pub async fn notify(db: &Db, channel: &str) -> crate::Result<()> {
    let c = db.client().await?;
    c.execute("SELECT pg_notify($1, '')", &[&channel]).await?;
    Ok(())
}
