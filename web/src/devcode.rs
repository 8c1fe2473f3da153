//! The dev login's one-time code: printed on stderr at start and again after every use, and
//! replaced after five wrong tries (see `devlogin`, which takes it at `POST /dev-login`).

use crate::token::ct_eq;
use rand::Rng as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

/// Wrong codes accepted before the code is replaced.
const MAX_FAILURES: u32 = 5;
/// Unambiguous characters; 12 of them carry 60 bits.
const ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";

fn new_code() -> String {
    let mut rng = rand::rng();
    (0..12)
        .map(|i| {
            let c = ALPHABET
                .get(rng.random_range(0..ALPHABET.len()))
                .copied()
                .unwrap_or(b'A') as char;
            if i == 4 || i == 8 {
                format!("-{c}")
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// State of the dev login.
pub(crate) struct DevLogin {
    code: Mutex<String>,
    failures: AtomicU32,
    url: String,
}

impl DevLogin {
    /// Creates the first code and prints it on stderr.
    pub(crate) fn new(public_url: &url::Url) -> Self {
        let url = public_url
            .join("login")
            .map(|u| u.to_string())
            .unwrap_or_default();
        let d = Self {
            code: Mutex::new(new_code()),
            failures: AtomicU32::new(0),
            url,
        };
        d.announce("");
        d
    }

    fn announce(&self, why: &str) {
        let code = self.current();
        actiond_runtime::tell(&format!(
            "actiond web: dev login one-time code{why}: {code}   (sign in at {})",
            self.url
        ));
    }

    fn rotate(&self, why: &str) {
        if let Ok(mut c) = self.code.lock() {
            *c = new_code();
        }
        self.failures.store(0, Ordering::SeqCst);
        self.announce(why);
    }

    /// The current code.
    pub(crate) fn current(&self) -> String {
        self.code.lock().map(|c| c.clone()).unwrap_or_default()
    }

    /// Checks a code; a match consumes it, too many misses replace it.
    pub(crate) fn check(&self, given: &str) -> bool {
        let given = given.trim().to_ascii_uppercase();
        let ok = ct_eq(&given, &self.current());
        if ok {
            self.rotate(" (the previous one was used)");
        } else if self.failures.fetch_add(1, Ordering::SeqCst) + 1 >= MAX_FAILURES {
            self.rotate(" (too many wrong codes)");
        }
        ok
    }
}
