//! HTTP/1.x wire format: request bytes built once, response heads parsed with
//! `httparse`, and body framing (Content-Length, chunked, until close).

pub mod chunked;
pub mod request;
pub mod response;

pub use chunked::{ChunkError, ChunkedDecoder};
pub use request::{ConnectionHeader, HttpVersion, RequestTemplate};
pub use response::{
    has_token, parse_head, Framing, HeadError, ResponseHead, MAX_HEADERS, MAX_HEAD_BYTES,
};
