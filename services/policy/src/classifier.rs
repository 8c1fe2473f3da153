//! Calls the classifier a tenant names in `policy.classifier` (see
//! [`actiond_core::classifier`] for the wire shapes and the raise-only rule).
//!
//! The operator maps names to URLs (`--classifier NAME=URL`, repeatable;
//! `ACTIOND_POLICY_CLASSIFIERS=NAME=URL,NAME=URL`), so a tenant admin chooses among endpoints
//! the operator set up and can never point policy at an address of their own. Each call has the
//! tenant's time budget for connect, request and the whole answer; redirects are not followed.

use actiond_core::classifier::{ClassifierAnswer, ClassifierRequest, MAX_ANSWER_BYTES, Outcome};
use actiond_core::tenant::PolicySection;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The operator's classifier endpoints, by name.
#[derive(Clone, Default)]
pub struct Classifiers {
    http: reqwest::Client,
    endpoints: HashMap<String, reqwest::Url>,
}

impl Classifiers {
    /// Parses `NAME=URL` specs. Errors name the spec and the rule: a name matching
    /// `^[a-z0-9][a-z0-9_.-]{0,63}$`, an `http` or `https` URL, each name once.
    pub fn parse(specs: &[String]) -> anyhow::Result<Self> {
        let mut endpoints = HashMap::new();
        for spec in specs.iter().filter(|s| !s.trim().is_empty()) {
            let Some((name, url)) = spec.trim().split_once('=') else {
                anyhow::bail!("--classifier {spec:?}: must be NAME=URL");
            };
            if !actiond_core::classifier::valid_endpoint_name(name) {
                anyhow::bail!(
                    "--classifier {spec:?}: the name must match ^[a-z0-9][a-z0-9_.-]{{0,63}}$"
                );
            }
            let url = reqwest::Url::parse(url)
                .map_err(|e| anyhow::anyhow!("--classifier {name}: {url:?} is not a URL: {e}"))?;
            if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
                anyhow::bail!("--classifier {name}: {url} must be an http or https URL");
            }
            if endpoints.insert(name.to_owned(), url).is_some() {
                anyhow::bail!("--classifier {name}: named twice");
            }
        }
        // The operator names each classifier's URL; `HTTP_PROXY` and friends are not read, so
        // the request (and the params it carries) goes to that URL and nowhere else.
        let http = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("actiond-policy/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Self { http, endpoints })
    }

    /// Names configured, sorted (for the startup log line).
    pub fn names(&self) -> Vec<&str> {
        let mut n: Vec<&str> = self.endpoints.keys().map(String::as_str).collect();
        n.sort_unstable();
        n
    }

    /// Asks the classifier `policy.classifier` names about `req`; `None` when the tenant names
    /// none. Returns the outcome and the time the call took (the whole call, capped by the
    /// tenant's timeout).
    pub async fn ask(
        &self,
        policy: &PolicySection,
        req: &ClassifierRequest<'_>,
    ) -> Option<(Outcome, Duration)> {
        let r = policy.classifier.as_ref()?;
        let started = Instant::now();
        let Some(url) = self.endpoints.get(&r.endpoint) else {
            return Some((Outcome::Unconfigured, Duration::ZERO));
        };
        let call = async {
            let resp = self
                .http
                .post(url.clone())
                .json(req)
                .send()
                .await
                .map_err(|e| Outcome::Error(without_url(e)))?;
            let status = resp.status();
            if !status.is_success() {
                return Err(Outcome::Error(format!("answered HTTP {}", status.as_u16())));
            }
            let body = read_capped(resp).await?;
            ClassifierAnswer::parse(&body)
                .map(|a| Outcome::of_answer(req.effect, a))
                .map_err(Outcome::Malformed)
        };
        let outcome = match tokio::time::timeout(r.timeout, call).await {
            Ok(Ok(o) | Err(o)) => o,
            Err(_) => Outcome::Timeout,
        };
        Some((outcome, started.elapsed()))
    }
}

/// The answer body, at most [`MAX_ANSWER_BYTES`] (+1 so that the parser reports the excess).
async fn read_capped(mut resp: reqwest::Response) -> Result<Vec<u8>, Outcome> {
    let mut body = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| Outcome::Error(without_url(e)))?
    {
        body.extend_from_slice(&chunk);
        if body.len() > MAX_ANSWER_BYTES {
            break;
        }
    }
    Ok(body)
}

/// A transport error without the URL (which the operator may have put a token in).
fn without_url(e: reqwest::Error) -> String {
    let e = e.without_url();
    if e.is_connect() {
        "connection failed".into()
    } else if e.is_timeout() {
        "timed out".into()
    } else {
        e.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_are_checked() {
        let ok = Classifiers::parse(&[
            "guard=http://127.0.0.1:9000/classify".into(),
            "b=https://c.example".into(),
        ])
        .unwrap();
        assert_eq!(ok.names(), ["b", "guard"]);
        for bad in [
            "guard",
            "Guard=http://x",
            "g=ftp://x",
            "g=not a url",
            "g=http://a,g=http://b",
        ] {
            let specs: Vec<String> = bad.split(',').map(str::to_owned).collect();
            assert!(Classifiers::parse(&specs).is_err(), "{bad}");
        }
    }
}
