//! HTTP/1.x: request bytes built once, response heads parsed with `httparse`, body
//! framing (Content-Length, chunked, until close), and the client connection that reads
//! one response at a time; the `CONNECT` that opens a tunnel through a forward proxy.

pub(crate) mod chunked;
pub(crate) mod conn;
pub(crate) mod reading;
pub(crate) mod request;
pub(crate) mod response;
pub(crate) mod tunnel;

pub(crate) use chunked::{ChunkError, ChunkedDecoder};
pub(crate) use request::{request_framing, ConnectionHeader, HttpVersion, RequestTemplate};
pub(crate) use response::{
    has_token, parse_head, Framing, ResponseHead, MAX_HEADERS, MAX_HEAD_BYTES,
};
