//! The leanest HTTP/2 client on the `h2` crate this project knows how to write, for
//! `bench/h2_floor.py`: what the crate (with tokio and rustls under it) costs per
//! request when nothing else runs. No clock read, no record, no histogram, no check
//! beyond the status: `--connections` TLS connections (ALPN h2, the engine's own
//! `h2::client::Builder`), each with `--streams` lanes that send a GET, wait for its
//! head, read its body and go again, until `-n` requests have been sent. One thread,
//! tokio's current-thread runtime; each connection is driven by a task of its own and
//! each lane is a task (`--one-task`: every lane of the thread in one task, polled
//! together, so no task is woken per response).
//!
//! cargo run --profile profiling --example h2_floor -- https://localhost:8443/ ca.pem
//!     [-n 300000] [--connections 4] [--streams 16] [--one-task]

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use h2::client::SendRequest;

type Lane = Pin<Box<dyn Future<Output = anyhow::Result<u64>>>>;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opt = |name: &str, default: u64| -> anyhow::Result<u64> {
        match args.iter().position(|a| a == name) {
            Some(i) => Ok(args
                .get(i + 1)
                .ok_or_else(|| anyhow::anyhow!("{name} needs a value"))?
                .parse()?),
            None => Ok(default),
        }
    };
    let (Some(url), Some(ca)) = (args.first(), args.get(1)) else {
        anyhow::bail!(
            "usage: h2_floor URL CA.pem [-n N] [--connections C] [--streams S] [--one-task]"
        );
    };
    let n = opt("-n", 300_000)?;
    let conns = opt("--connections", 4)?;
    let streams = opt("--streams", 16)?;
    let one_task = args.iter().any(|a| a == "--one-task");
    let url = url::Url::parse(url)?;
    let host = url.host_str().unwrap_or("localhost").to_string();
    let port = url.port().unwrap_or(443);
    let uri: http::Uri = url.as_str().parse()?;

    let mut roots = rustls::RootCertStore::empty();
    let pem = std::fs::read(ca)?;
    for cert in rustls::pki_types::pem::PemObject::pem_slice_iter(&pem) {
        roots.add(cert?)?;
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"h2".to_vec()];
    let tls = tokio_rustls::TlsConnector::from(Arc::new(tls));

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    let ok = local.block_on(&rt, async move {
        let left = Rc::new(Cell::new(n));
        let mut lanes: Vec<Lane> = Vec::new();
        for _ in 0..conns {
            let tcp = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
            tcp.set_nodelay(true)?;
            let name = rustls::pki_types::ServerName::try_from(host.clone())?;
            let stream = tls.connect(name, tcp).await?;
            let (send, connection) = handshake::api::h2::client()
                .handshake::<_, Bytes>(stream)
                .await?;
            tokio::task::spawn_local(async move {
                let _ = connection.await;
            });
            for _ in 0..streams {
                lanes.push(Box::pin(lane(send.clone(), uri.clone(), left.clone())));
            }
        }
        if one_task {
            All { lanes, ok: 0 }.await
        } else {
            let tasks: Vec<_> = lanes.into_iter().map(tokio::task::spawn_local).collect();
            let mut ok = 0;
            for t in tasks {
                ok += t.await??;
            }
            Ok(ok)
        }
    })?;
    if ok != n {
        anyhow::bail!("{ok} of {n} requests answered 200");
    }
    println!("{ok} requests ok");
    Ok(())
}

/// One lane: a stream at a time until the run's requests are all taken.
async fn lane(
    send: SendRequest<Bytes>,
    uri: http::Uri,
    left: Rc<Cell<u64>>,
) -> anyhow::Result<u64> {
    let mut ok = 0;
    let mut send = send;
    while left.get() > 0 {
        left.set(left.get() - 1);
        send = send.ready().await?;
        let req = http::Request::get(uri.clone()).body(())?;
        let (response, _stream) = send.send_request(req, true)?;
        let resp = response.await?;
        let status = resp.status();
        let mut body = resp.into_body();
        while let Some(chunk) = body.data().await {
            let chunk = chunk?;
            let _ = body.flow_control().release_capacity(chunk.len());
        }
        if status == http::StatusCode::OK {
            ok += 1;
        }
    }
    Ok(ok)
}

/// Every lane in one future: all are polled when any wakes it.
struct All {
    lanes: Vec<Lane>,
    ok: u64,
}

impl Future for All {
    type Output = anyhow::Result<u64>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut i = 0;
        while i < self.lanes.len() {
            match self.lanes[i].as_mut().poll(cx) {
                Poll::Ready(r) => {
                    self.ok += r?;
                    drop(self.lanes.swap_remove(i));
                }
                Poll::Pending => i += 1,
            }
        }
        if self.lanes.is_empty() {
            Poll::Ready(Ok(self.ok))
        } else {
            Poll::Pending
        }
    }
}
