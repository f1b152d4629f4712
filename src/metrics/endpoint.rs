//! The `/metrics` endpoint: an HTTP/1.1 server (hyper) on its own thread, which makes
//! the families at each scrape and writes them in the format the scraper asked for.

use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Method, Request, Response, StatusCode};

use super::{encode, Format, Source};
use crate::parse::UsageError;

/// Where `--metrics` serves when it is given without an address.
pub(crate) const DEFAULT_ADDR: &str = "127.0.0.1:9464";

/// `--metrics`'s address: `HOST:PORT`, `[V6]:PORT`, or a port alone (on loopback).
/// Only an address given binds beyond loopback.
pub(crate) fn parse_addr(flag: &str, s: &str) -> Result<SocketAddr, UsageError> {
    let bad = || {
        UsageError(format!(
            "{flag} {s:?}: expected an address to serve metrics on (127.0.0.1:9464, [::1]:9464, 0.0.0.0:9464 or a port)"
        ))
    };
    if let Ok(port) = s.trim_start_matches(':').parse::<u16>() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    let (host, port) = s.rsplit_once(':').ok_or_else(bad)?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    match host {
        "localhost" => Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port)),
        _ => Err(bad()),
    }
}

/// A running endpoint; stopped when dropped.
pub(crate) struct Endpoint {
    addr: SocketAddr,
    scrapes: Arc<AtomicU64>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Endpoint {
    /// Bind `addr` (an error names it) and serve the families of `source` there.
    pub(crate) fn start(addr: SocketAddr, source: Arc<dyn Source>) -> anyhow::Result<Endpoint> {
        let listener = std::net::TcpListener::bind(addr).map_err(|e| {
            UsageError(format!(
                "--metrics {addr}: cannot listen there ({e}); give another address or port"
            ))
        })?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let scrapes = Arc::new(AtomicU64::new(0));
        let (tx, rx) = tokio::sync::oneshot::channel();
        let counted = scrapes.clone();
        let thread = std::thread::Builder::new()
            .name("handshake-metrics".into())
            .spawn(move || serve(listener, source, counted, rx))?;
        Ok(Endpoint {
            addr,
            scrapes,
            stop: Some(tx),
            thread: Some(thread),
        })
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Scrapes of `/metrics` served so far.
    pub(crate) fn scrapes(&self) -> u64 {
        self.scrapes.load(Ordering::SeqCst)
    }

    /// After the end: wait for one more scrape (the final values collected), at most
    /// `linger`, or a signal (one more, if the work ended by one). Whether a scrape
    /// came.
    pub(crate) fn linger(&self, linger: Duration) -> bool {
        let (interrupted, hurried) = (crate::interrupt::requested(), crate::interrupt::hurried());
        let before = self.scrapes();
        let until = Instant::now() + linger;
        while Instant::now() < until {
            if self.scrapes() > before {
                return true;
            }
            if (!interrupted && crate::interrupt::requested())
                || (!hurried && crate::interrupt::hurried())
            {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.scrapes() > before
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(
    listener: std::net::TcpListener,
    source: Arc<dyn Source>,
    scrapes: Arc<AtomicU64>,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    rt.block_on(async move {
        let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
            return;
        };
        loop {
            tokio::select! {
                _ = &mut stop => break,
                got = listener.accept() => {
                    let Ok((stream, _)) = got else { continue };
                    let (source, scrapes) = (source.clone(), scrapes.clone());
                    tokio::spawn(async move {
                        let service = hyper::service::service_fn(move |req| {
                            let r = answer(&req, source.as_ref(), &scrapes);
                            async move { Ok::<_, Infallible>(r) }
                        });
                        let io = hyper_util::rt::TokioIo::new(stream);
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(io, service)
                            .await;
                    });
                }
            }
        }
    });
}

fn answer<B>(req: &Request<B>, source: &dyn Source, scrapes: &AtomicU64) -> Response<Full<Bytes>> {
    let reply = |status: StatusCode, ctype: &str, body: String| {
        let mut r = Response::new(Full::new(Bytes::from(body)));
        *r.status_mut() = status;
        if let Ok(v) = ctype.parse() {
            r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
        }
        r
    };
    let text = "text/plain; charset=utf-8";
    match (req.method(), req.uri().path()) {
        (&Method::GET | &Method::HEAD, "/metrics") => {
            let accept = req
                .headers()
                .get(hyper::header::ACCEPT)
                .and_then(|v| v.to_str().ok());
            let format = Format::from_accept(accept);
            // Counted as it begins, before the values are read: a scrape that read them
            // before the run's end was kept is not taken for the one after it (`linger`).
            scrapes.fetch_add(1, Ordering::SeqCst);
            let body = encode(source.families(), format);
            reply(StatusCode::OK, format.content_type(), body)
        }
        (&Method::GET | &Method::HEAD, "/") => reply(
            StatusCode::OK,
            text,
            "handshake: metrics at /metrics (docs/metrics.md)\n".into(),
        ),
        (&Method::GET | &Method::HEAD, _) => reply(
            StatusCode::NOT_FOUND,
            text,
            "not found: try /metrics\n".into(),
        ),
        _ => reply(
            StatusCode::METHOD_NOT_ALLOWED,
            text,
            "only GET /metrics\n".into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_default_to_loopback() {
        let a = |s| parse_addr("--metrics", s).map(|a| a.to_string());
        assert_eq!(a("9464").unwrap(), "127.0.0.1:9464");
        assert_eq!(a(":9000").unwrap(), "127.0.0.1:9000");
        assert_eq!(a("[::1]:9464").unwrap(), "[::1]:9464");
        assert_eq!(a("0.0.0.0:9464").unwrap(), "0.0.0.0:9464");
        assert_eq!(a("localhost:1").unwrap(), "127.0.0.1:1");
        assert!(a("nowhere")
            .unwrap_err()
            .0
            .contains("--metrics \"nowhere\""));
    }
}
