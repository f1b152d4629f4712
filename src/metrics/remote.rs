//! Prometheus remote write 1.0: the families as time series (a protobuf `WriteRequest`,
//! `prost`), snappy-compressed (`snap`), POSTed (`hyper`) every interval and once at
//! the end, on one kept-alive connection. A push runs on its own thread and never holds
//! the load up: at most one is in flight, and one that fails or takes longer than the
//! interval is dropped (its samples counted); the next carries the counters' totals.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use prost::Message;

use super::{Family, Kind, Label, Source, Value};

#[derive(Clone, PartialEq, prost::Message)]
struct WriteRequest {
    #[prost(message, repeated, tag = "1")]
    pub timeseries: Vec<TimeSeries>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct TimeSeries {
    #[prost(message, repeated, tag = "1")]
    pub labels: Vec<WireLabel>,
    #[prost(message, repeated, tag = "2")]
    pub samples: Vec<Sample>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct WireLabel {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub value: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Sample {
    #[prost(double, tag = "1")]
    pub value: f64,
    #[prost(int64, tag = "2")]
    pub timestamp: i64,
}

/// One series: its name, labels (sorted, `__name__` first, as the protocol asks) and
/// value.
fn one(
    name: String,
    labels: &[Label],
    extra: Option<(&'static str, String)>,
    v: f64,
    at: i64,
) -> TimeSeries {
    let mut l: Vec<WireLabel> = labels
        .iter()
        .cloned()
        .chain(extra)
        .map(|(k, v)| WireLabel {
            name: k.to_string(),
            value: v,
        })
        .collect();
    l.push(WireLabel {
        name: "__name__".into(),
        value: name,
    });
    l.sort_by(|a, b| a.name.cmp(&b.name));
    TimeSeries {
        labels: l,
        samples: vec![Sample {
            value: v,
            timestamp: at,
        }],
    }
}

/// The families as remote-write series at `at` (ms since the epoch), each with the
/// `extra` labels: a counter's `_total`, a histogram's cumulative `_bucket{le}`, `_sum`
/// and `_count`, as a scrape of the same families would store them.
pub(crate) fn series(fams: &[Family], extra: &[Label], at: i64) -> Vec<TimeSeries> {
    let mut out = Vec::new();
    for f in fams {
        for s in &f.series {
            let mut labels = s.labels.clone();
            labels.extend(extra.iter().cloned());
            match &s.value {
                Value::Number(v) => out.push(one(f.sample_name(), &labels, None, *v, at)),
                Value::Histogram {
                    sum,
                    count,
                    buckets,
                } => {
                    let mut cumulative = 0;
                    for (le, n) in buckets {
                        cumulative += n;
                        let le = if le.is_infinite() {
                            "+Inf".to_string()
                        } else {
                            // As the exposition writes it (1.0, 0.25).
                            format!("{le:?}")
                        };
                        out.push(one(
                            format!("{}_bucket", f.name),
                            &labels,
                            Some(("le", le)),
                            cumulative as f64,
                            at,
                        ));
                    }
                    out.push(one(format!("{}_sum", f.name), &labels, None, *sum, at));
                    out.push(one(
                        format!("{}_count", f.name),
                        &labels,
                        None,
                        *count as f64,
                        at,
                    ));
                }
            }
        }
        debug_assert!(matches!(
            f.kind,
            Kind::Counter | Kind::Gauge | Kind::Histogram
        ));
    }
    out
}

/// Where and how often to push.
#[derive(Debug, Clone)]
pub(crate) struct RemotePlan {
    pub url: http::Uri,
    pub interval: Duration,
    /// The `instance` label.
    pub instance: String,
}

/// What the pushes did.
#[derive(Debug, Default, Clone)]
pub(crate) struct Pushed {
    pub pushes: u64,
    pub samples: u64,
    pub failed: u64,
    pub dropped_samples: u64,
    pub connections: u64,
    /// The first failure's reason.
    pub first_failure: Option<String>,
}

impl Pushed {
    /// One line for the end of the run, when something was dropped.
    pub(crate) fn line(&self, url: &http::Uri) -> Option<String> {
        (self.failed > 0).then(|| {
            format!(
                "handshake: remote write to {url}: {} of {} pushes failed, {} samples dropped (first: {}); the run's figures are not affected",
                self.failed,
                self.pushes,
                self.dropped_samples,
                self.first_failure.as_deref().unwrap_or("unknown")
            )
        })
    }
}

/// The pushing thread.
pub(crate) struct Pusher {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    pushed: Arc<Mutex<Pushed>>,
    pub url: http::Uri,
}

impl Pusher {
    pub(crate) fn start(plan: RemotePlan, source: Arc<dyn Source>) -> anyhow::Result<Pusher> {
        let stop = Arc::new(AtomicBool::new(false));
        let pushed = Arc::new(Mutex::new(Pushed::default()));
        let url = plan.url.clone();
        let thread = {
            let (stop, pushed) = (stop.clone(), pushed.clone());
            std::thread::Builder::new()
                .name("handshake-remote-write".into())
                .spawn(move || push_loop(&plan, source.as_ref(), &stop, &pushed))?
        };
        Ok(Pusher {
            stop,
            thread: Some(thread),
            pushed,
            url,
        })
    }

    /// Push the last values (at most a few seconds more) and say what the pushes did.
    pub(crate) fn finish(mut self) -> Pushed {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.pushed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl Drop for Pusher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// The final push may take this long at most.
const LAST_PUSH: Duration = Duration::from_secs(5);

fn push_loop(plan: &RemotePlan, source: &dyn Source, stop: &AtomicBool, pushed: &Mutex<Pushed>) {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    let extra = vec![("instance", plan.instance.clone())];
    let mut client = Client::new(plan.url.clone());
    rt.block_on(async {
        let mut next = Instant::now() + plan.interval;
        loop {
            let last = stop.load(Ordering::SeqCst);
            if last || Instant::now() >= next {
                let at = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as i64);
                let ts = series(&source.families(), &extra, at);
                let n = ts.len() as u64;
                let body = encode(ts);
                let limit = if last { LAST_PUSH } else { plan.interval };
                let got = tokio::time::timeout(limit, client.post(body)).await;
                let mut p = pushed.lock().unwrap_or_else(|p| p.into_inner());
                p.pushes += 1;
                p.connections = client.connections;
                let failure = match got {
                    Ok(Ok(())) => None,
                    Ok(Err(e)) => Some(e),
                    Err(_) => {
                        client.reset();
                        Some(format!("no answer within {limit:?}"))
                    }
                };
                match failure {
                    None => p.samples += n,
                    Some(why) => {
                        p.failed += 1;
                        p.dropped_samples += n;
                        p.first_failure.get_or_insert(why);
                    }
                }
                drop(p);
                if last {
                    return;
                }
                next = Instant::now() + plan.interval;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
}

/// A `WriteRequest`, protobuf then snappy (block format, as remote write asks).
pub(crate) fn encode(ts: Vec<TimeSeries>) -> Vec<u8> {
    let raw = WriteRequest { timeseries: ts }.encode_to_vec();
    snap::raw::Encoder::new()
        .compress_vec(&raw)
        .expect("snappy compresses any input")
}

/// The receiver's connection, kept alive between pushes.
struct Client {
    url: http::Uri,
    sender: Option<hyper::client::conn::http1::SendRequest<Full<Bytes>>>,
    connections: u64,
}

impl Client {
    fn new(url: http::Uri) -> Client {
        Client {
            url,
            sender: None,
            connections: 0,
        }
    }

    fn reset(&mut self) {
        self.sender = None;
    }

    async fn connect(&mut self) -> Result<(), String> {
        let host = self
            .url
            .host()
            .unwrap_or("localhost")
            .trim_matches(['[', ']']);
        let tls = self.url.scheme_str() == Some("https");
        let port = self.url.port_u16().unwrap_or(if tls { 443 } else { 80 });
        let tcp = tokio::net::TcpStream::connect((host, port))
            .await
            .map_err(|e| format!("connecting to {host}:{port}: {e}"))?;
        let _ = tcp.set_nodelay(true);
        self.connections += 1;
        let sender = if tls {
            let opts = crate::net::tls::TlsOptions {
                alpn: vec![b"http/1.1".to_vec()],
                ..Default::default()
            };
            let config = crate::net::tls::client_config(&opts, true).map_err(|e| e.to_string())?;
            let name = rustls::pki_types::ServerName::try_from(host.to_string())
                .map_err(|e| format!("{host}: {e}"))?;
            let stream = tokio_rustls::TlsConnector::from(config)
                .connect(name, tcp)
                .await
                .map_err(|e| format!("TLS with {host}: {e}"))?;
            handshake(stream).await?
        } else {
            handshake(tcp).await?
        };
        self.sender = Some(sender);
        Ok(())
    }

    async fn post(&mut self, body: Vec<u8>) -> Result<(), String> {
        if self.sender.as_ref().is_none_or(|s| s.is_closed()) {
            self.connect().await?;
        }
        let Some(sender) = self.sender.as_mut() else {
            return Err("no connection".into());
        };
        sender
            .ready()
            .await
            .map_err(|e| format!("connection: {e}"))?;
        let authority = self
            .url
            .authority()
            .map(|a| a.as_str())
            .unwrap_or("localhost");
        let req = hyper::Request::post(self.url.path_and_query().map_or("/", |p| p.as_str()))
            .header(hyper::header::HOST, authority)
            .header(hyper::header::CONTENT_TYPE, "application/x-protobuf")
            .header(hyper::header::CONTENT_ENCODING, "snappy")
            .header("X-Prometheus-Remote-Write-Version", "0.1.0")
            .header(
                hyper::header::USER_AGENT,
                concat!("handshake/", env!("CARGO_PKG_VERSION")),
            )
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| e.to_string())?;
        let resp = match sender.send_request(req).await {
            Ok(r) => r,
            Err(e) => {
                self.reset();
                return Err(format!("sending: {e}"));
            }
        };
        let status = resp.status();
        // Read the answer whole, so the connection can carry the next push.
        let body = resp.into_body().collect().await.map(|b| b.to_bytes());
        if status.is_success() {
            Ok(())
        } else {
            let said = body
                .ok()
                .map(|b| {
                    String::from_utf8_lossy(&b[..b.len().min(200)])
                        .trim()
                        .to_string()
                })
                .unwrap_or_default();
            Err(format!("the receiver answered {status}: {said}"))
        }
    }
}

async fn handshake<S>(
    stream: S,
) -> Result<hyper::client::conn::http1::SendRequest<Full<Bytes>>, String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| format!("HTTP/1.1 with the receiver: {e}"))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_are_named_and_sorted_as_a_scrape_stores_them() {
        let mut f = Family::new("handshake_requests", "x", Kind::Counter);
        f.number(vec![("program", "curl".into())], 5.0);
        let mut h = Family::new("handshake_request_duration_seconds", "y", Kind::Histogram);
        h.series.push(super::super::Series {
            labels: Vec::new(),
            value: Value::Histogram {
                sum: 1.5,
                count: 3,
                buckets: vec![(0.5, 2), (f64::INFINITY, 1)],
            },
        });
        let ts = series(&[f, h], &[("instance", "a".into())], 7);
        let names: Vec<String> = ts
            .iter()
            .map(|t| {
                t.labels
                    .iter()
                    .map(|l| format!("{}={}", l.name, l.value))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .collect();
        assert_eq!(
            names,
            [
                "__name__=handshake_requests_total,instance=a,program=curl",
                "__name__=handshake_request_duration_seconds_bucket,instance=a,le=0.5",
                "__name__=handshake_request_duration_seconds_bucket,instance=a,le=+Inf",
                "__name__=handshake_request_duration_seconds_sum,instance=a",
                "__name__=handshake_request_duration_seconds_count,instance=a",
            ]
        );
        assert_eq!(ts[2].samples[0].value, 3.0);
        // It decodes back after snappy.
        let raw = snap::raw::Decoder::new()
            .decompress_vec(&encode(ts.clone()))
            .unwrap();
        assert_eq!(WriteRequest::decode(raw.as_slice()).unwrap().timeseries, ts);
    }
}
