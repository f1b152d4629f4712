//! Where a command measures: the embedded server (on loopback, or across the link the
//! link flags describe) at a path, or a server given by URL; and what counts as a
//! success beside 2xx and 3xx.

use crate::cli::{LinkArgs, RequestArgs};
use crate::lab::LinkSpec;
use crate::parse::UsageError;
use crate::plan::build::RequestConfig;

/// The link a command without a URL runs across (`--rtt` and the rest), if any.
pub(crate) fn one_link(f: &LinkArgs) -> Result<Option<LinkSpec>, UsageError> {
    if !f.any() {
        return Ok(None);
    }
    Ok(super::parse_link(f, false)?.into_iter().next())
}

/// The path to ask the embedded server for, when the command runs against it: no URL, or
/// a URL that is only a path (`/bytes/47000`). `None` for a URL of a server elsewhere;
/// the link flags need the embedded server.
pub(crate) fn embedded_path(
    url: Option<&str>,
    link: &LinkArgs,
    urls_from_file: bool,
) -> Result<Option<String>, UsageError> {
    let path = match url {
        _ if urls_from_file => None,
        None => Some("/".to_string()),
        Some(u) if u.starts_with('/') => Some(u.to_string()),
        Some(_) => None,
    };
    if path.is_none() && link.any() {
        return Err(UsageError(
            "--rtt, --jitter, --loss and --bandwidth emulate a link to the embedded server: give no URL (or only a path, like /bytes/47000); to put another server or client across the link, use `handshake lab`".into(),
        ));
    }
    if path.is_none() && link.cert_chain_bytes.is_some() {
        return Err(UsageError(
            "--cert-chain-bytes pads the embedded server's certificate chain: give no URL (or only a path, like /bytes/47000)".into(),
        ));
    }
    Ok(path)
}

/// `--ok-status`: the statuses counted as successes beside 2xx and 3xx (read before the
/// run, so a mistake in it costs no run).
pub(crate) fn ok_statuses(ok_status: Option<&str>) -> Result<Vec<(u16, u16)>, UsageError> {
    match ok_status {
        Some(s) => crate::parse::parse_ok_status("--ok-status", s),
        None => Ok(Vec::new()),
    }
}

/// The request's flags read once: at `url`, or against the embedded server (`path`) at
/// a stand-in URL, the request aimed at the server once it is up
/// (`RequestConfig::aimed_at`).
pub(crate) fn base_request(
    a: &RequestArgs,
    url: Option<&str>,
    path: Option<&String>,
) -> Result<RequestConfig, UsageError> {
    let at = if path.is_some() {
        Some("http://127.0.0.1/")
    } else {
        url
    };
    super::request_config(a, at, Vec::new())
}
