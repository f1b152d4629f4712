//! What the server says about its connection, read off the frames as they arrive: the
//! `h2` crate speaks the protocol; this only watches the server's bytes go by (frame
//! headers, and the payloads of SETTINGS and GOAWAY) to learn when the server's SETTINGS
//! came, what they were, and how and why a GOAWAY ended the connection — which `h2`
//! does not expose.

use std::cell::RefCell;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;

pub(crate) use crate::record::ServerSettings;

const FRAME_HEADER: usize = 9;
const TYPE_RST_STREAM: u8 = 0x3;
const TYPE_SETTINGS: u8 = 0x4;
const TYPE_GOAWAY: u8 = 0x7;
const FLAG_ACK: u8 = 0x1;
/// The most of a SETTINGS payload kept (one entry is 6 bytes; servers send a handful).
const MAX_SETTINGS_PAYLOAD: usize = 6 * 32;

impl ServerSettings {
    fn apply(&mut self, payload: &[u8]) {
        for e in payload.chunks_exact(6) {
            let v = u32::from_be_bytes([e[2], e[3], e[4], e[5]]);
            match u16::from_be_bytes([e[0], e[1]]) {
                0x1 => self.header_table_size = Some(v),
                0x2 => self.enable_push = Some(v),
                0x3 => self.max_concurrent_streams = Some(v),
                0x4 => self.initial_window_size = Some(v),
                0x5 => self.max_frame_size = Some(v),
                0x6 => self.max_header_list_size = Some(v),
                _ => {}
            }
        }
    }
}

/// A GOAWAY the server sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GoAway {
    pub last_stream_id: u32,
    pub error_code: u32,
}

/// What has been seen on one connection so far.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    /// When the server's first SETTINGS frame (not an ACK) was complete.
    pub settings_at: Option<Instant>,
    pub settings: ServerSettings,
    /// The last GOAWAY (a server may send one with a high id, then the final one).
    pub goaway: Option<GoAway>,
    /// RST_STREAM frames from the server.
    pub resets: u64,
    /// Bytes read from the server.
    pub bytes: u64,
    /// The server answered in HTTP/1: the status line its first bytes began with.
    pub http1_status_line: Option<String>,
}

/// A frame's 9-byte header (RFC 9113 §4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FrameHead {
    pub len: usize,
    pub kind: u8,
    pub flags: u8,
    pub stream_id: u32,
}

/// What [`Frames::feed`] found in the bytes given: a frame's header, a piece of its
/// payload, the frame's end.
pub(crate) enum FrameEvent<'a> {
    Head(FrameHead),
    Payload(&'a [u8]),
    End,
}

/// Reads a sequence of HTTP/2 frames as its bytes arrive, in pieces of any size: frame
/// headers split over reads are put together; payloads are handed on, not kept.
#[derive(Debug, Default)]
pub(crate) struct Frames {
    header: [u8; FRAME_HEADER],
    header_len: usize,
    /// Payload bytes of the current frame still to come.
    remaining: usize,
}

impl Frames {
    pub(crate) fn feed<'a>(&mut self, mut bytes: &'a [u8], mut on: impl FnMut(FrameEvent<'a>)) {
        while !bytes.is_empty() {
            if self.header_len < FRAME_HEADER {
                let take = (FRAME_HEADER - self.header_len).min(bytes.len());
                self.header[self.header_len..self.header_len + take]
                    .copy_from_slice(&bytes[..take]);
                self.header_len += take;
                bytes = &bytes[take..];
                if self.header_len < FRAME_HEADER {
                    return;
                }
                let h = self.header;
                self.remaining = u32::from_be_bytes([0, h[0], h[1], h[2]]) as usize;
                on(FrameEvent::Head(FrameHead {
                    len: self.remaining,
                    kind: h[3],
                    flags: h[4],
                    stream_id: u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff,
                }));
            }
            let take = self.remaining.min(bytes.len());
            if take > 0 {
                on(FrameEvent::Payload(&bytes[..take]));
            }
            self.remaining -= take;
            bytes = &bytes[take..];
            if self.remaining == 0 {
                on(FrameEvent::End);
                self.header_len = 0;
            }
        }
    }
}

/// Where the reader is in the server's frame sequence.
#[derive(Debug, Default)]
struct Parser {
    frames: Frames,
    kind: u8,
    flags: u8,
    /// The part of the current payload kept (SETTINGS and GOAWAY only).
    payload: Vec<u8>,
    keep: usize,
}

impl Parser {
    fn feed(&mut self, bytes: &[u8], seen: &mut Seen) {
        seen.bytes += bytes.len() as u64;
        let Parser {
            frames,
            kind,
            flags,
            payload,
            keep,
        } = self;
        frames.feed(bytes, |event| match event {
            FrameEvent::Head(h) => {
                (*kind, *flags) = (h.kind, h.flags);
                payload.clear();
                *keep = match h.kind {
                    TYPE_SETTINGS if h.flags & FLAG_ACK == 0 => MAX_SETTINGS_PAYLOAD,
                    TYPE_GOAWAY => 8,
                    _ => 0,
                };
                if h.kind == TYPE_RST_STREAM {
                    seen.resets += 1;
                }
            }
            FrameEvent::Payload(p) => {
                let room = keep.saturating_sub(payload.len()).min(p.len());
                payload.extend_from_slice(&p[..room]);
            }
            FrameEvent::End => end_frame(*kind, *flags, payload, seen),
        });
    }
}

fn end_frame(kind: u8, flags: u8, payload: &[u8], seen: &mut Seen) {
    match kind {
        TYPE_SETTINGS if flags & FLAG_ACK == 0 => {
            seen.settings.apply(payload);
            if seen.settings_at.is_none() {
                seen.settings_at = Some(Instant::now());
            }
        }
        TYPE_GOAWAY if payload.len() == 8 => {
            let p = payload;
            seen.goaway = Some(GoAway {
                last_stream_id: u32::from_be_bytes([p[0] & 0x7f, p[1], p[2], p[3]]),
                error_code: u32::from_be_bytes([p[4], p[5], p[6], p[7]]),
            });
        }
        _ => {}
    }
}

/// A stream whose incoming bytes are watched; what was seen is shared with the pool.
pub(crate) struct Watched<S> {
    inner: S,
    parser: Parser,
    pub seen: Rc<RefCell<Seen>>,
    /// Notified once, when the server's first SETTINGS has come.
    pub settings_came: Rc<Notify>,
}

impl<S> Watched<S> {
    pub(crate) fn new(inner: S) -> Watched<S> {
        Watched {
            inner,
            parser: Parser::default(),
            seen: Rc::new(RefCell::new(Seen::default())),
            settings_came: Rc::new(Notify::new()),
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        let before = buf.filled().len();
        let res = Pin::new(&mut me.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = res {
            let new = &buf.filled()[before..];
            if !new.is_empty() {
                let mut seen = me.seen.borrow_mut();
                if seen.bytes == 0 && new.starts_with(b"HTTP/1.") {
                    // Not a frame but an HTTP/1 response to the preface (the server's
                    // first read only).
                    let line = new
                        .split(|b| *b == b'\r' || *b == b'\n')
                        .next()
                        .unwrap_or(new);
                    let line = &line[..line.len().min(80)];
                    seen.http1_status_line = Some(String::from_utf8_lossy(line).into_owned());
                }
                let had_settings = seen.settings_at.is_some();
                me.parser.feed(new, &mut seen);
                if !had_settings && seen.settings_at.is_some() {
                    me.settings_came.notify_one();
                }
            }
        }
        res
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// The name of an HTTP/2 error code (RFC 9113 section 7), for reports.
pub(crate) fn error_code_name(code: u32) -> &'static str {
    match code {
        0x0 => "no_error",
        0x1 => "protocol_error",
        0x2 => "internal_error",
        0x3 => "flow_control_error",
        0x4 => "settings_timeout",
        0x5 => "stream_closed",
        0x6 => "frame_size_error",
        0x7 => "refused_stream",
        0x8 => "cancel",
        0x9 => "compression_error",
        0xa => "connect_error",
        0xb => "enhance_your_calm",
        0xc => "inadequate_security",
        0xd => "http_1_1_required",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let len = payload.len() as u32;
        let mut f = len.to_be_bytes()[1..].to_vec();
        f.push(kind);
        f.push(flags);
        f.extend_from_slice(&stream.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn settings_and_goaway_are_read_in_any_split() {
        let mut settings = Vec::new();
        for (id, v) in [(3u16, 100u32), (4, 65_535), (5, 16_384)] {
            settings.extend_from_slice(&id.to_be_bytes());
            settings.extend_from_slice(&v.to_be_bytes());
        }
        let mut wire = frame(TYPE_SETTINGS, 0, 0, &settings);
        wire.extend(frame(TYPE_SETTINGS, FLAG_ACK, 0, &[]));
        wire.extend(frame(0x0, 0x1, 1, &[7u8; 300]));
        wire.extend(frame(TYPE_RST_STREAM, 0, 3, &7u32.to_be_bytes()));
        let mut goaway = 5u32.to_be_bytes().to_vec();
        goaway.extend_from_slice(&0u32.to_be_bytes());
        goaway.extend_from_slice(b"debug data");
        wire.extend(frame(TYPE_GOAWAY, 0, 0, &goaway));
        for split in [1usize, 2, 7, 9, 10, 64, wire.len()] {
            let mut p = Parser::default();
            let mut seen = Seen::default();
            for chunk in wire.chunks(split) {
                p.feed(chunk, &mut seen);
            }
            assert_eq!(
                seen.settings.max_concurrent_streams,
                Some(100),
                "split {split}"
            );
            assert_eq!(seen.settings.initial_window_size, Some(65_535));
            assert_eq!(seen.settings.max_frame_size, Some(16_384));
            assert_eq!(seen.settings.header_table_size, None);
            assert!(seen.settings_at.is_some());
            assert_eq!(seen.resets, 1);
            assert_eq!(
                seen.goaway,
                Some(GoAway {
                    last_stream_id: 5,
                    error_code: 0
                })
            );
            assert_eq!(seen.bytes, wire.len() as u64);
        }
    }
}
