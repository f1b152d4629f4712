//! The audit: stands where the server is and reports how a client uses its
//! connections: requests per connection, HTTP versions and `Connection` headers sent,
//! idle gaps, peak concurrency, and how each connection ended (the client closed it after
//! a complete response, reset it, left response bytes unread, the server side closed it,
//! or it was still open). Answers itself like the embedded server, or forwards to
//! `--upstream` over its own persistent connections. HTTP/2 clients (ALPN h2 with
//! `--tls`, prior knowledge on plain) are answered too, their streams and concurrency
//! per connection reported. With `--proxy-mode` it is the client's forward proxy instead:
//! plain requests forwarded, `CONNECT` tunnels relayed and read as they pass (`relay`).

pub(crate) mod answer;
mod h2;
mod log;
mod mtls;
mod proxy;
mod relay;
mod report;
pub(crate) mod server;
mod verdict;

pub(crate) use answer::{AuditConfig, ProxyMode, Upstream};

pub(crate) use server::start;
