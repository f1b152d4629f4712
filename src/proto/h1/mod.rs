//! HTTP/1.x: request bytes built once, response heads parsed with `httparse`, body
//! framing (Content-Length, chunked, until close), and the client connection that reads
//! one response at a time; the `CONNECT` that opens a tunnel through a forward proxy.

pub mod chunked;
pub mod conn;
pub mod reading;
pub mod request;
pub mod response;
pub mod tunnel;

pub use chunked::{ChunkError, ChunkedDecoder};
pub use request::{request_framing, ConnectionHeader, HttpVersion, RequestTemplate};
pub use response::{
    has_token, parse_head, Framing, HeadError, ResponseHead, MAX_HEADERS, MAX_HEAD_BYTES,
};
