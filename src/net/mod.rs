//! Networking: name resolution, TCP (or Unix socket) connect and TLS, each timed by the caller at its
//! boundaries, and the byte stream the HTTP/1 layer reads and writes.

pub(crate) mod authority;
pub(crate) mod client_auth;
pub(crate) mod descriptors;
pub(crate) mod dial;
pub(crate) mod dns;
pub(crate) mod kernel;
pub(crate) mod listen_queue;
pub(crate) mod local_ports;
pub(crate) mod proxy;
pub(crate) mod quic;
pub(crate) mod stream;
pub(crate) mod tap;
pub(crate) mod tls;
pub(crate) mod transport;

pub(crate) use dial::{
    classify_connect_error, classify_io_error, classify_io_failure, classify_tls_error, Origin,
};
pub(crate) use stream::Stream;
pub(crate) use transport::Transport;
