//! Networking: name resolution, TCP (or Unix socket) connect and TLS, each timed by the caller at its
//! boundaries, and the byte stream the HTTP/1 layer reads and writes.

pub mod descriptors;
pub mod dial;
pub mod dns;
pub mod kernel;
pub mod listen_queue;
pub mod local_ports;
pub mod proxy;
pub mod quic;
pub mod stream;
pub mod tap;
pub mod tls;
pub mod transport;

pub use dial::{
    classify_connect_error, classify_io_error, classify_io_failure, classify_tls_error, Origin,
};
pub use stream::Stream;
pub use transport::Transport;
