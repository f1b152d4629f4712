//! `-L`: following redirects. Each hop is a request of its own. A `Location` is resolved
//! against the URL that answered it (RFC 3986, by the `url` crate) and becomes a target
//! built as the scenario's own are (its origin with `--resolve`, `--connect-to`, the
//! proxy; its request bytes and HTTP/2 head), once per thread. An origin first met in a
//! redirect joins the scenario's list of found origins, shared by its threads, so that
//! it has one index (its connections' slot in every driver) and one name in the report.

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use super::build::{check_proxied, origin_of, parse_url, target};
use super::{Scenario, Target};
use crate::net::Origin;
use crate::record::{ErrorDetail, ErrorKind, Failure};

/// Targets built for redirects on one thread, each once (at most `KEPT`; past that they
/// are built for each hop).
#[derive(Default)]
pub(crate) struct Hops {
    targets: HashMap<Box<str>, Rc<Target>>,
}

const KEPT: usize = 1024;

/// Why a redirect was not followed: its error, and the message for the report's example.
pub(crate) type Refusal = (Failure, String);

pub(crate) fn refused(detail: ErrorDetail, why: String) -> Refusal {
    (Failure::new(ErrorKind::Redirect, detail), why)
}

impl Hops {
    /// The target `status` with `location` leads to from `from`, or why it cannot be
    /// followed.
    pub(crate) fn next(
        &mut self,
        sc: &Scenario,
        from: &Target,
        status: u16,
        location: &str,
    ) -> Result<Rc<Target>, Refusal> {
        // 303 asks for a GET; 301 and 302 turn a POST into a GET (as browsers and curl
        // do); 307 and 308 keep the method and the body.
        let method = &from.template.method;
        let get = (status == 303 && method != "HEAD")
            || (matches!(status, 301 | 302) && method == "POST");
        // What the hop's target is built from (the request it follows, the Location,
        // whether it turns into a GET): a hop met before is found without parsing a URL.
        let key = format!("{method} {}\n{location}\n{get}", from.url);
        if let Some(t) = self.targets.get(key.as_str()) {
            return Ok(t.clone());
        }
        let unusable = |why: String| refused(ErrorDetail::RedirectUnusable, why);
        let base =
            url::Url::parse(&from.url).map_err(|e| unusable(format!("{}: {e}", from.url)))?;
        let mut to = base
            .join(location)
            .map_err(|e| unusable(format!("Location {location:?} from {}: {e}", from.url)))?;
        to.set_fragment(None);
        if !matches!(to.scheme(), "http" | "https") {
            return Err(unusable(format!(
                "Location {to} from {}: only http:// and https:// are followed",
                from.url
            )));
        }
        let t = Rc::new(build(sc, from, to.as_str(), get).map_err(unusable)?);
        if self.targets.len() < KEPT {
            self.targets.insert(key.into(), t.clone());
        }
        Ok(t)
    }
}

/// The target for `raw` (absolute), reached by a redirect from `from`.
fn build(sc: &Scenario, from: &Target, raw: &str, get: bool) -> Result<Target, String> {
    let rd = sc
        .redirects
        .as_ref()
        .expect("redirects are followed only with -L");
    let u = parse_url(raw).map_err(|e| e.0)?;
    if sc.strategy.quic() && !u.tls {
        return Err(format!(
            "{raw}: --strategy {} cannot follow a redirect to http:// (HTTP/3 runs over QUIC, which is always encrypted)",
            sc.strategy.name()
        ));
    }
    let mut req = rd.req.clone();
    req.urls.clear();
    if get {
        req.method = "GET".into();
        req.body = None;
    }
    // To another host, credentials and cookies stay behind (as curl does).
    if !from.template.host.eq_ignore_ascii_case(&u.authority) {
        req.headers.retain(|(k, _)| {
            !k.eq_ignore_ascii_case("authorization") && !k.eq_ignore_ascii_case("cookie")
        });
    }
    let key = (u.tls, u.host.clone(), u.port);
    let (index, found) = match sc.origins.iter().position(|o| o.key() == key) {
        Some(i) => (i, None),
        None => {
            let mut list = rd.found.lock().unwrap_or_else(|p| p.into_inner());
            let i = match list.iter().position(|o| o.key() == key) {
                Some(i) => i,
                None => {
                    let mut one = Vec::new();
                    origin_of(&mut one, raw, &u, &req).map_err(|e| e.0)?;
                    let mut o = one.pop().expect("origin_of adds the origin");
                    o.index = (sc.origins.len() + list.len()) as u32;
                    o.hop = o.route(true).map(Arc::new);
                    check_proxied(sc.strategy, raw, &o).map_err(|e| e.0)?;
                    list.push(Arc::new(o));
                    list.len() - 1
                }
            };
            (sc.origins.len() + i, Some(list[i].clone()))
        }
    };
    let origin: &Origin = match &found {
        Some(o) => o,
        None => &sc.origins[index],
    };
    let mut t = target(sc.strategy, &req, raw, &u, (index, origin)).map_err(|e| e.0)?;
    t.found_origin = found;
    Ok(t)
}
