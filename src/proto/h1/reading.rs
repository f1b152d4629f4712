//! One response read from its bytes as they arrive, without I/O: the head (1xx skipped),
//! then the body by its framing, counting body bytes without keeping them (or keeping
//! them, for audit's proxy, which relays them). The async connection (`conn`), the
//! engine's readiness loop and the audit proxy feed it alike, so a response is read the
//! same way whichever way its bytes came and wherever they go.

use crate::proto::h1::{parse_head, ChunkError, ChunkedDecoder, Framing, ResponseHead};
use crate::record::notes::{status_example, Taken};
use crate::record::{ErrorDetail, ErrorKind, Failure};

/// Why reading a response failed.
#[derive(Debug)]
pub struct ReadFail {
    pub failure: Failure,
    /// Some response byte had arrived (if not, a reused connection may just be stale).
    pub any_byte: bool,
}

impl ReadFail {
    fn new(kind: ErrorKind, detail: ErrorDetail, any_byte: bool) -> ReadFail {
        ReadFail {
            failure: Failure::new(kind, detail),
            any_byte,
        }
    }
}

/// Where the response is.
enum Part {
    Head,
    Length(u64),
    Chunked(ChunkedDecoder),
    UntilClose,
}

/// A response being read.
pub(crate) struct Reading {
    head_request: bool,
    /// Keep a copy of the final head (`trace`, `doctor`).
    keep_head: bool,
    /// Keep a redirect's `Location` (`-L`).
    follow: bool,
    part: Part,
    head: Option<ResponseHead>,
    /// Body bytes taken so far.
    pub body_bytes: u64,
    /// The final head's bytes, when kept.
    pub kept_head: Option<Vec<u8>>,
    /// The body's data (a chunked body's decoded), when kept ([`Reading::keeping_body`]).
    pub kept_body: Option<Vec<u8>>,
    /// A redirect's `Location`, when followed.
    pub location: Option<Box<str>>,
    /// The statuses whose example the reader's worker has (set by the worker; none by
    /// default: every 3xx to 5xx response's example is taken).
    pub taken: Taken,
    /// What the final response said, where `taken` wanted its example.
    pub said: Option<Box<str>>,
}

impl Reading {
    pub(crate) fn new(head_request: bool, keep_head: bool, follow: bool) -> Reading {
        Reading {
            head_request,
            keep_head,
            follow,
            part: Part::Head,
            head: None,
            body_bytes: 0,
            kept_head: None,
            kept_body: None,
            location: None,
            taken: Taken::default(),
            said: None,
        }
    }

    /// Keep the body's data too (in `kept_body`), for a reader that hands it on.
    pub(crate) fn keeping_body(mut self) -> Reading {
        self.kept_body = Some(Vec::new());
        self
    }

    /// The final head, once it is read.
    pub(crate) fn final_head(&self) -> Option<&ResponseHead> {
        self.head.as_ref()
    }

    /// The head is read: what follows is body.
    pub(crate) fn in_body(&self) -> bool {
        !matches!(self.part, Part::Head)
    }

    /// Take what belongs to the response from `buf` (bytes not yet taken, in order):
    /// how many bytes it took, and whether the response is complete (then the rest of
    /// `buf`, if any, came after it).
    pub(crate) fn advance(&mut self, buf: &[u8]) -> Result<(usize, bool), ReadFail> {
        let mut used = 0;
        if matches!(self.part, Part::Head) {
            loop {
                if used == buf.len() {
                    return Ok((used, false));
                }
                let Some(h) = self.head(&buf[used..])? else {
                    return Ok((used, false));
                };
                used += h.head_len;
                if h.is_informational() {
                    continue;
                }
                self.part = match h.framing {
                    Framing::None | Framing::Length(0) => {
                        self.head = Some(h);
                        return Ok((used, true));
                    }
                    Framing::Length(n) => Part::Length(n),
                    Framing::Chunked => Part::Chunked(ChunkedDecoder::new()),
                    Framing::UntilClose => Part::UntilClose,
                };
                self.head = Some(h);
                break;
            }
        }
        let rest = &buf[used..];
        match &mut self.part {
            Part::Head => unreachable!("the head was read above"),
            Part::Length(remaining) => {
                let take = (rest.len() as u64).min(*remaining);
                *remaining -= take;
                self.body_bytes += take;
                if let Some(kept) = &mut self.kept_body {
                    kept.extend_from_slice(&rest[..take as usize]);
                }
                Ok((used + take as usize, *remaining == 0))
            }
            Part::Chunked(dec) => {
                let fed = match &mut self.kept_body {
                    Some(kept) => dec.feed_data(rest, kept),
                    None => dec.feed(rest),
                };
                let fed = fed.map_err(|e| match e {
                    ChunkError::Invalid(_) => {
                        ReadFail::new(ErrorKind::Protocol, ErrorDetail::BadChunk, true)
                    }
                    ChunkError::TooLarge(_) => {
                        ReadFail::new(ErrorKind::TooLarge, ErrorDetail::ChunkTooLarge, true)
                    }
                })?;
                self.body_bytes += fed.body_bytes;
                Ok((used + fed.consumed, fed.done))
            }
            Part::UntilClose => {
                self.body_bytes += rest.len() as u64;
                if let Some(kept) = &mut self.kept_body {
                    kept.extend_from_slice(rest);
                }
                Ok((buf.len(), false))
            }
        }
    }

    /// One head at the start of `buf`, if it is all there; what the report keeps of it
    /// noted.
    fn head(&mut self, buf: &[u8]) -> Result<Option<ResponseHead>, ReadFail> {
        let h = match parse_head(buf, self.head_request) {
            Ok(Some(h)) => h,
            Ok(None) => return Ok(None),
            Err(e) => {
                return Err(ReadFail {
                    failure: e.failure().said(e.message()),
                    any_byte: true,
                });
            }
        };
        let head = &buf[..h.head_len];
        if self.keep_head && !h.is_informational() {
            self.kept_head = Some(head.to_vec());
        }
        if self.taken.wants(h.status) {
            // A redirect or error response whose example its worker wants: what it said
            // (a redirect's Location; an error's first body bytes that arrived with the
            // head).
            let line = head.split(|b| *b == b'\n').next().unwrap_or(head);
            let said = if h.status < 400 {
                location(head).unwrap_or_default()
            } else {
                &buf[h.head_len..]
            };
            self.said = Some(status_example(line, said));
        }
        // Only a redirect's head is searched (with -L).
        if self.follow && crate::proto::is_redirect(h.status) {
            self.location = crate::proto::redirect_location(h.status, location(head));
        }
        if h.status == 101 {
            return Err(ReadFail::new(
                ErrorKind::Protocol,
                ErrorDetail::UnrequestedUpgrade,
                true,
            ));
        }
        Ok(Some(h))
    }

    /// The stream ended (`any_byte`: some byte of the response had come): Ok when that
    /// ends the response (a close-delimited body), else why it is incomplete.
    pub(crate) fn at_eof(&self, any_byte: bool) -> Result<(), ReadFail> {
        let (kind, detail) = match self.part {
            Part::UntilClose => return Ok(()),
            Part::Head if any_byte => (ErrorKind::ClosedBeforeResponse, ErrorDetail::EofInHead),
            Part::Head => (ErrorKind::ClosedBeforeResponse, ErrorDetail::EmptyReply),
            Part::Length(_) => (ErrorKind::BodyIncomplete, ErrorDetail::ShortBody),
            Part::Chunked(_) => (ErrorKind::BodyIncomplete, ErrorDetail::MissingLastChunk),
        };
        Err(ReadFail::new(kind, detail, any_byte))
    }

    /// The final head, once `advance` said the response is complete (or `at_eof` that
    /// the stream's end completes it).
    pub(crate) fn into_head(self) -> Option<ResponseHead> {
        self.head
    }

    /// A read error's detail: a reset in the head or in the body.
    pub(crate) fn reset_detail(&self) -> ErrorDetail {
        if self.in_body() {
            ErrorDetail::ResetInBody
        } else {
            ErrorDetail::ResetInHead
        }
    }
}

/// The value of a response head's `Location` header, if it has one.
fn location(head: &[u8]) -> Option<&[u8]> {
    head.split(|b| *b == b'\n').find_map(|l| {
        let (name, value) = l.split_at(l.iter().position(|b| *b == b':')?);
        name.eq_ignore_ascii_case(b"location")
            .then(|| value[1..].trim_ascii())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fed a byte at a time or all at once, a response reads the same.
    #[test]
    fn a_response_reads_the_same_in_any_pieces() {
        let wire: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\nHTTP/1.1";
        for step in [1, 3, wire.len()] {
            let mut r = Reading::new(false, true, false);
            let (mut at, mut pending) = (0, Vec::new());
            let done = loop {
                let end = (at + step).min(wire.len());
                pending.extend_from_slice(&wire[at..end]);
                at = end;
                let (used, done) = r.advance(&pending).expect("valid");
                pending.drain(..used);
                if done || at == wire.len() {
                    pending.extend_from_slice(&wire[at..]);
                    break done;
                }
            };
            assert!(done, "complete with step {step}");
            assert_eq!(r.body_bytes, 5);
            assert_eq!(pending, b"HTTP/1.1", "what came after it is left");
            assert!(r
                .kept_head
                .as_ref()
                .is_some_and(|h| h.starts_with(b"HTTP/1.1 200")));
            assert_eq!(r.into_head().map(|h| h.status), Some(200));
        }
    }

    #[test]
    fn the_end_of_the_stream_completes_only_a_close_delimited_body() {
        let mut r = Reading::new(false, false, false);
        assert_eq!(
            r.at_eof(false).unwrap_err().failure.detail,
            Some(ErrorDetail::EmptyReply)
        );
        let (used, done) = r.advance(b"HTTP/1.0 200 OK\r\n\r\nabc").unwrap();
        assert_eq!((used, done, r.body_bytes), (22, false, 3));
        assert!(r.at_eof(true).is_ok());
        let mut short = Reading::new(false, false, false);
        short
            .advance(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc")
            .unwrap();
        let f = short.at_eof(true).unwrap_err();
        assert_eq!(
            (f.failure.kind, f.failure.detail),
            (ErrorKind::BodyIncomplete, Some(ErrorDetail::ShortBody))
        );
    }
}
