//! The agents' side: `POST /v1/proposals`, closed loop (a fixed number of clients, each sending
//! its next proposal when the previous one is answered) or open loop (a fixed arrival rate,
//! whatever the answers do).

use std::time::{Duration, Instant};

/// What the agents saw.
#[derive(Debug, Clone)]
pub struct Submitted {
    /// Submit latency of each proposal in milliseconds, sorted. Closed loop: the HTTP round
    /// trip. Open loop: from the proposal's scheduled arrival to its answer, so a late send
    /// counts as latency (no coordinated omission).
    pub latency_ms: Vec<f64>,
    /// Seconds from the first arrival to the last answer.
    pub seconds: f64,
}

/// One proposal's request.
#[derive(Clone)]
pub struct Target {
    /// HTTP client.
    pub http: reqwest::Client,
    /// API base URLs: proposal n goes to the (n mod len)th.
    pub apis: Vec<String>,
    /// Agent bearer token.
    pub token: String,
    /// `params.body.kind`: `ping` (allowed) or `review` (escalates).
    pub kind: &'static str,
    /// Added to each proposal's number (`params.body.n`), so a warm-up's proposals never
    /// share an intent with the measured ones.
    pub first: usize,
}

impl Target {
    async fn submit(&self, n: usize) {
        let body = format!(
            r#"{{"action":"webhook.post","params":{{"body":{{"kind":"{}","n":{}}}}}}}"#,
            self.kind,
            self.first + n
        );
        let r = self
            .http
            .post(format!("{}/v1/proposals", self.apis[n % self.apis.len()]))
            .bearer_auth(&self.token)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("POST /v1/proposals");
        let status = r.status().as_u16();
        let text = r.text().await.unwrap_or_default();
        assert_eq!(status, 202, "POST /v1/proposals: {text}");
    }
}

fn finish(mut latency_ms: Vec<f64>, started: Instant) -> Submitted {
    latency_ms.sort_by(f64::total_cmp);
    Submitted {
        latency_ms,
        seconds: started.elapsed().as_secs_f64(),
    }
}

/// Closed loop: `clients` concurrent clients share `proposals` submissions.
pub async fn closed(t: &Target, proposals: usize, clients: usize) -> Submitted {
    let started = Instant::now();
    let per_client = proposals.div_ceil(clients.max(1));
    let mut tasks = Vec::new();
    for c in 0..clients {
        let t = t.clone();
        let first = c * per_client;
        let n = per_client.min(proposals.saturating_sub(first));
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(n);
            for i in first..first + n {
                let s = Instant::now();
                t.submit(i).await;
                lat.push(s.elapsed().as_secs_f64() * 1000.0);
            }
            lat
        }));
    }
    let mut all = Vec::with_capacity(proposals);
    for task in futures_util::future::join_all(tasks).await {
        all.extend(task.expect("client task"));
    }
    finish(all, started)
}

/// Open loop: proposal `i` is sent at `i / rate` seconds after the start, each on a task of
/// its own, so a slow answer never delays the next arrival.
#[expect(
    clippy::disallowed_methods,
    reason = "an open loop: proposal i is sent at i / rate seconds, the schedule is the load"
)]
pub async fn open(t: &Target, proposals: usize, rate: f64) -> Submitted {
    let started = Instant::now();
    let base = tokio::time::Instant::now();
    let mut tasks = Vec::with_capacity(proposals);
    for i in 0..proposals {
        let at = base + Duration::from_secs_f64(i as f64 / rate);
        tokio::time::sleep_until(at).await;
        let t = t.clone();
        tasks.push(tokio::spawn(async move {
            t.submit(i).await;
            at.elapsed().as_secs_f64() * 1000.0
        }));
    }
    let mut all = Vec::with_capacity(proposals);
    for task in futures_util::future::join_all(tasks).await {
        all.push(task.expect("arrival task"));
    }
    finish(all, started)
}
