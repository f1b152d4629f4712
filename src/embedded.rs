//! The embedded server where a command without a URL measures: on loopback, or on the
//! server side of a lab's emulated link with the client on the other side.

use crate::lab::{Lab, LinkSpec};
use crate::progress::Steps;
use crate::report::link::LinkReport;
use crate::server::{self, ServerConfig};

/// The embedded server on the lab's server side. That side is a namespace of the lab's
/// own: the standard ports are free.
pub(crate) fn lab_server(lab: &Lab, cfg: ServerConfig) -> anyhow::Result<server::RunningServer> {
    let cfg = ServerConfig {
        listen: Some((crate::lab::SERVER_ADDR, 80).into()),
        tls_listen: Some((crate::lab::SERVER_ADDR, 443).into()),
        ..cfg
    };
    lab.in_server(move || server::start(cfg))?
}

/// The embedded server, on loopback or on the server side of a lab.
pub(crate) struct Embedded {
    pub srv: server::RunningServer,
    pub lab: Option<Lab>,
}

impl Embedded {
    /// The embedded server with its defaults, taking TLS early data when `early_data`,
    /// its certificate chain padded to `chain_bytes`; where the client presents a
    /// certificate (`client_cert`: `--cert`), asking each client for one (optional, any:
    /// its signature checked, its chain not). The lab's link check (when there is a link)
    /// said on `steps`.
    pub(crate) fn with_early_data(
        spec: Option<LinkSpec>,
        early_data: bool,
        chain_bytes: Option<usize>,
        client_cert: bool,
        steps: &Steps,
    ) -> anyhow::Result<Embedded> {
        let cfg = ServerConfig {
            early_data,
            cert_chain_bytes: chain_bytes,
            client_certs: client_cert.then_some(crate::server::tls::ClientCerts {
                roots: None,
                required: false,
            }),
            ..ServerConfig::default()
        };
        Embedded::start(spec, cfg, steps)
    }

    pub(crate) fn start(
        spec: Option<LinkSpec>,
        cfg: ServerConfig,
        steps: &Steps,
    ) -> anyhow::Result<Embedded> {
        let Some(spec) = spec else {
            return Ok(Embedded {
                srv: server::start(ServerConfig {
                    listen: Some(([127, 0, 0, 1], 0).into()),
                    tls_listen: Some(([127, 0, 0, 1], 0).into()),
                    ..cfg
                })?,
                lab: None,
            });
        };
        let mut lab = Lab::start(spec)?;
        let srv = lab_server(&lab, cfg)?;
        lab.measure(steps)?;
        Ok(Embedded {
            srv,
            lab: Some(lab),
        })
    }

    /// The URL of `path` on the HTTP or HTTPS listener.
    pub(crate) fn url(&self, tls: bool, path: &str) -> String {
        let base = if tls {
            self.srv.https_url()
        } else {
            self.srv.http_url()
        }
        .expect("the embedded server has both listeners");
        format!("{}{}", base.trim_end_matches('/'), path)
    }

    /// Run `f` where the client is: in the lab's client namespace, or right here.
    pub(crate) fn client<T: Send>(&self, f: impl FnOnce() -> T + Send) -> anyhow::Result<T> {
        match &self.lab {
            Some(l) => l.in_client(f),
            None => Ok(f()),
        }
    }

    pub(crate) fn rtt_set_ms(&self) -> Option<f64> {
        self.lab.as_ref().map(|l| l.spec.rtt.as_secs_f64() * 1000.0)
    }

    /// Stop the server (and the lab): its counts and the link's report.
    pub(crate) fn finish(self) -> (server::StatsSnapshot, Option<LinkReport>) {
        let snapshot = self.srv.snapshot();
        self.srv.stop();
        (snapshot, self.lab.map(Lab::finish))
    }
}

/// Run `f` on the client's side: that of the embedded server's lab when there is one,
/// else right here (a URL given, or the embedded server on loopback).
pub(crate) fn on_client<T: Send>(
    embedded: Option<&Embedded>,
    f: impl FnOnce() -> T + Send,
) -> anyhow::Result<T> {
    match embedded {
        Some(e) => e.client(f),
        None => Ok(f()),
    }
}
