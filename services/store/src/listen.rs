//! Wake-ups with LISTEN/NOTIFY on one dedicated connection outside the pool, with reconnect.
//!
//! NOTIFY is only a hint: notifications sent while the connection is down are lost, so after
//! every (re)LISTEN the waker fires once and the worker re-reads its queue; workers also poll on
//! a timer. NOTIFY takes a global lock at commit, so senders debounce ([`Notifier`]).

use crate::Db;
use futures_util::StreamExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::Notify;
use tokio_postgres::AsyncMessage;

/// Channel the API notifies after submissions (policy listens).
pub const CHANNEL_PENDING: &str = "actiond_pending";
/// Channel the policy and approvers notify after approvals (executor listens).
pub const CHANNEL_APPROVED: &str = "actiond_approved";

/// Channel a trigger notifies at the commit of any change to `agents` or
/// `agent_workload_identities` (V17); api processes drop their agent cache on it.
pub const CHANNEL_AGENTS: &str = "actiond_agents";

/// What a LISTEN connection reports to [`spawn_listener_with`]'s callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListenEvent {
    /// `LISTEN` succeeded on a new connection: notifications from now on arrive; any sent
    /// before were lost.
    Subscribed,
    /// A notification arrived on the channel.
    Notification,
    /// The connection was lost (or `LISTEN` failed): notifications are lost until the next
    /// [`ListenEvent::Subscribed`].
    Lost,
}

/// Spawns a task that LISTENs on `channel` forever and calls `notify_one` on `wake` for every
/// notification and after every (re)subscription.
pub fn spawn_listener(
    db: &Db,
    channel: &'static str,
    wake: Arc<Notify>,
) -> tokio::task::JoinHandle<()> {
    spawn_listener_with(db, channel, move |e| {
        if e != ListenEvent::Lost {
            wake.notify_one();
        }
    })
}

/// The longest wait between two attempts to open the LISTEN connection again. Short, as a
/// failover is usually over in seconds and the new primary should hear LISTEN soon after;
/// one connection attempt every 2 s per process costs the server next to nothing.
pub const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// Spawns a task that LISTENs on `channel` forever on its own connection (outside the pool),
/// reconnecting with backoff (at most [`MAX_BACKOFF`]), and calls `on` for every
/// [`ListenEvent`]. The connection is opened with the pool's configuration: with a
/// multi-host `DATABASE_URL` and `target_session_attrs=read-write`, a reconnect after a
/// failover LISTENs on the new primary (a standby cannot LISTEN: NOTIFY is sent only on the
/// primary).
pub fn spawn_listener_with(
    db: &Db,
    channel: &'static str,
    on: impl Fn(ListenEvent) + Send + Sync + 'static,
) -> tokio::task::JoinHandle<()> {
    let cfg = db.config().clone();
    let tls = db.tls().clone();
    let on = Arc::new(on);
    tokio::spawn(async move {
        let mut backoff = Duration::from_millis(100);
        loop {
            let (client, mut conn) = match cfg.connect(tls.clone()).await {
                Ok(x) => {
                    backoff = Duration::from_millis(100);
                    x
                }
                Err(e) => {
                    let e = crate::connect_error::explain(&cfg, &e);
                    tracing::warn!(error = %e, channel, "LISTEN connection failed; retrying");
                    actiond_runtime::clock::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    continue;
                }
            };
            let o = on.clone();
            let lost = Arc::new(AtomicBool::new(false));
            let lost_in_driver = lost.clone();
            let driver = tokio::spawn(async move {
                let mut msgs = futures_util::stream::poll_fn(move |cx| conn.poll_message(cx));
                while let Some(m) = msgs.next().await {
                    match m {
                        Ok(AsyncMessage::Notification(_)) => o(ListenEvent::Notification),
                        Ok(_) => {}
                        Err(e) => {
                            tracing::warn!(error = %e, "LISTEN connection lost");
                            break;
                        }
                    }
                }
                lost_in_driver.store(true, Ordering::SeqCst);
                o(ListenEvent::Lost);
            });
            match client.batch_execute(&format!("LISTEN {channel}")).await {
                Ok(()) => {
                    // Notifications during the gap were lost: the callee re-reads what it needs.
                    on(ListenEvent::Subscribed);
                    if lost.load(Ordering::SeqCst) {
                        // The connection died while subscribing: `Lost` may have come first.
                        on(ListenEvent::Lost);
                    }
                }
                Err(e) => {
                    // E.g. a standby ("cannot execute LISTEN during recovery"): close this
                    // connection (dropping the client ends it) and try again.
                    tracing::warn!(error = %e, channel, "LISTEN failed; reconnecting");
                    drop(client);
                    let _ = driver.await;
                    actiond_runtime::clock::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    continue;
                }
            }
            let _ = driver.await;
            actiond_runtime::clock::sleep(backoff).await;
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
                actiond_runtime::clock::sleep(interval).await;
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
