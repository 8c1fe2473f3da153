//! A short-lived, per-process cache of the api's per-request agent lookups (by token hash or by
//! workload identity), emptied the moment anything about an agent changes.
//!
//! Rules that keep revocation immediate:
//! - a V17 trigger notifies [`CHANNEL_AGENTS`] at the commit of any UPDATE, DELETE or TRUNCATE
//!   of `agents` or `agent_workload_identities`; every notification empties the whole cache;
//! - the cache answers only while its LISTEN connection is subscribed: before the first
//!   `LISTEN`, after a lost connection and until the next `LISTEN` (notifications in that gap are
//!   lost) every lookup goes to the database and nothing is stored;
//! - a lookup that was in flight when a notification arrived is not stored (a generation counter
//!   taken before the read must still be current when the result is stored);
//! - only live agents are stored, each for at most `ttl` and never past its own `expires_at`.
//!
//! What is left: a revocation reaches an api process when its notification does (a local socket
//! write after the commit). A LISTEN connection that dies without either end noticing would
//! miss it: `ttl` bounds how long a cached agent can outlive its revocation then.

use crate::agents::Agent;
use crate::listen::{CHANNEL_AGENTS, ListenEvent, spawn_listener_with};
use crate::{Db, Result};
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Entries kept at most; when full, the cache is emptied (tokens are few, this is a bound).
const MAX_ENTRIES: usize = 10_000;

/// What an agent was looked up by.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AgentKey {
    /// Hex SHA-256 of a static agent token.
    Token(String),
    /// A verified workload JWT's `(iss, sub)`.
    Workload(String, String),
}

struct Inner {
    entries: Mutex<HashMap<AgentKey, (Agent, Instant)>>,
    generation: AtomicU64,
    subscribed: AtomicBool,
    ttl: Duration,
}

impl Inner {
    fn invalidate(&self, subscribed: Option<bool>) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        if let Some(s) = subscribed {
            self.subscribed.store(s, Ordering::SeqCst);
        }
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }
}

/// The cache (cheap to clone; clones share entries). [`AgentCache::disabled`] caches nothing.
#[derive(Clone)]
pub struct AgentCache {
    inner: Option<Arc<Inner>>,
}

impl AgentCache {
    /// A cache that stores nothing: every lookup reads the database.
    pub fn disabled() -> Self {
        Self { inner: None }
    }

    /// Starts a cache whose entries live at most `ttl` (zero: [`AgentCache::disabled`]), with
    /// its LISTEN task on its own connection to `db`'s server. Must run inside a Tokio runtime.
    pub fn spawn(db: &Db, ttl: Duration) -> Self {
        if ttl.is_zero() {
            return Self::disabled();
        }
        let inner = Arc::new(Inner {
            entries: Mutex::new(HashMap::new()),
            generation: AtomicU64::new(0),
            subscribed: AtomicBool::new(false),
            ttl,
        });
        let weak = Arc::downgrade(&inner);
        spawn_listener_with(db, CHANNEL_AGENTS, move |e| {
            if let Some(inner) = weak.upgrade() {
                tracing::debug!(event = ?e, "agent cache emptied");
                inner.invalidate(match e {
                    ListenEvent::Subscribed => Some(true),
                    ListenEvent::Notification => None,
                    ListenEvent::Lost => Some(false),
                });
            }
        });
        Self { inner: Some(inner) }
    }

    /// Whether the cache currently answers (its LISTEN connection is subscribed).
    pub fn is_live(&self) -> bool {
        self.inner
            .as_ref()
            .is_some_and(|i| i.subscribed.load(Ordering::SeqCst))
    }

    /// The live agent for `key`: from the cache when it holds a fresh entry, otherwise from
    /// `load` (the database read), whose live result is stored unless something changed
    /// meanwhile. Returns the agent and whether it came from the cache.
    pub async fn get_or_load<F, Fut>(&self, key: AgentKey, load: F) -> Result<(Option<Agent>, bool)>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Option<Agent>>>,
    {
        let Some(inner) = self.inner.as_ref().filter(|_| self.is_live()) else {
            return Ok((load().await?, false));
        };
        let now = Instant::now();
        {
            let entries = inner.entries.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((agent, stored)) = entries.get(&key)
                && now.duration_since(*stored) < inner.ttl
                && agent
                    .expires_at
                    .is_none_or(|e| e > actiond_runtime::clock::now_utc())
            {
                return Ok((Some(agent.clone()), true));
            }
        }
        let generation = inner.generation.load(Ordering::SeqCst);
        let agent = load().await?;
        if let Some(a) = &agent {
            let mut entries = inner.entries.lock().unwrap_or_else(|e| e.into_inner());
            // Checked under the lock that `invalidate` clears under: a notification that came
            // after the read began either bumped the generation already, or clears this entry.
            if inner.generation.load(Ordering::SeqCst) == generation
                && inner.subscribed.load(Ordering::SeqCst)
            {
                if entries.len() >= MAX_ENTRIES {
                    entries.clear();
                }
                entries.insert(key, (a.clone(), Instant::now()));
            }
        }
        Ok((agent, false))
    }
}
