//! Per-protocol connection drivers: how a request is written and a response read on one
//! connection. `h1` is HTTP/1.x, `h2` HTTP/2; the limits on a response read are shared in `pace`.

pub mod h1;
pub mod h2;
pub mod h3;
pub mod pace;
