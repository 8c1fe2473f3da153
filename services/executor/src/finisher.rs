//! Group commit of handler outcomes: every outcome that is ready while the previous write is
//! in flight goes into the next one, so a busy executor records many outcomes per transaction
//! and an idle one records each at once (no timer, no added wait).

use actiond_core::state::ProposalState;
use actiond_store::Db;
use actiond_store::executor_queue::{self, Finish};
use actiond_store::proposals::ProposalRow;
use tokio::sync::{mpsc, oneshot};

/// Outcomes written in one transaction at most.
const MAX_BATCH: usize = 64;

struct Item {
    row: ProposalRow,
    outcome: ProposalState,
    detail: String,
    reply: oneshot::Sender<Result<bool, String>>,
}

/// Handle to the outcome writer task of one executor (cheap to clone).
#[derive(Clone)]
pub struct Finisher {
    tx: mpsc::Sender<Item>,
}

impl Finisher {
    /// Starts the writer task for executor `owner` (must run inside a Tokio runtime). It ends
    /// when every handle is dropped.
    pub fn spawn(db: Db, owner: String) -> Self {
        let (tx, rx) = mpsc::channel(1024);
        tokio::spawn(write_loop(db, owner, rx));
        Self { tx }
    }

    /// Records `outcome` (with its internal `detail`) on `row`, which this executor started.
    /// `Ok(false)` when the lease was lost (the sweeper marks it `outcome_unknown`); `Err` when
    /// the write failed (the caller may retry).
    pub async fn finish(
        &self,
        row: &ProposalRow,
        outcome: ProposalState,
        detail: &str,
    ) -> anyhow::Result<bool> {
        let (reply, answer) = oneshot::channel();
        let item = Item {
            row: row.clone(),
            outcome,
            detail: detail.to_owned(),
            reply,
        };
        self.tx
            .send(item)
            .await
            .map_err(|_| anyhow::anyhow!("the outcome writer has stopped"))?;
        answer
            .await
            .map_err(|_| anyhow::anyhow!("the outcome writer has stopped"))?
            .map_err(anyhow::Error::msg)
    }
}

async fn write_loop(db: Db, owner: String, mut rx: mpsc::Receiver<Item>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let items: Vec<Finish<'_>> = batch
            .iter()
            .map(|i| Finish {
                row: &i.row,
                outcome: i.outcome,
                detail: &i.detail,
            })
            .collect();
        let result = executor_queue::finish_many(&db, &owner, &items).await;
        drop(items);
        match result {
            Ok(done) => {
                for (item, ok) in batch.drain(..).zip(done) {
                    let _ = item.reply.send(Ok(ok));
                }
            }
            Err(e) => {
                let msg = e.to_string();
                for item in batch.drain(..) {
                    let _ = item.reply.send(Err(msg.clone()));
                }
            }
        }
    }
}
