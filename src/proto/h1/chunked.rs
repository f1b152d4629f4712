//! A strict, incremental decoder for `Transfer-Encoding: chunked` bodies (RFC 9112 7.1).
//! It never buffers body bytes: it only tells how many of the input bytes were body.

/// Longest chunk-size line (size and extensions) accepted.
const MAX_SIZE_LINE: usize = 4096;
/// Most trailer bytes accepted.
const MAX_TRAILER_BYTES: usize = 64 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkError {
    /// A size that is not hex, a missing CRLF, or another framing violation.
    Invalid(&'static str),
    /// A chunk size beyond u64, a size line or trailers too long.
    TooLarge(&'static str),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading hex digits of a chunk size.
    Size {
        digits: u8,
    },
    /// After the size: optional whitespace and extensions until CR.
    Ext,
    /// Expecting LF after the size line's CR.
    SizeLf,
    Data,
    DataCr,
    DataLf,
    /// At the start of a trailer line (or the final empty line).
    TrailerStart,
    TrailerLine,
    TrailerLf,
    EndLf,
    Done,
}

/// Incremental chunked-body decoder.
#[derive(Debug, Clone)]
pub struct ChunkedDecoder {
    state: State,
    size: u64,
    remaining: u64,
    line_len: usize,
    trailer_len: usize,
}

/// What one call to [`ChunkedDecoder::feed`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fed {
    /// Input bytes used; the rest (if `done`) belongs to whatever follows the body.
    pub consumed: usize,
    /// How many of the consumed bytes were body data.
    pub body_bytes: u64,
    pub done: bool,
}

impl Default for ChunkedDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl ChunkedDecoder {
    pub fn new() -> Self {
        ChunkedDecoder {
            state: State::Size { digits: 0 },
            size: 0,
            remaining: 0,
            line_len: 0,
            trailer_len: 0,
        }
    }

    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Feed input; returns how much was consumed and how much of it was body.
    pub fn feed(&mut self, input: &[u8]) -> Result<Fed, ChunkError> {
        self.feed_inner(input, None)
    }

    /// Like [`feed`](Self::feed), and append the body data found to `data` (for a proxy
    /// that forwards the body, not only counts it).
    pub fn feed_data(&mut self, input: &[u8], data: &mut Vec<u8>) -> Result<Fed, ChunkError> {
        self.feed_inner(input, Some(data))
    }

    // One match over the decoder's states (RFC 9112 §7.1), byte by byte: split up, the
    // state and the input position would be passed back and forth between the parts.
    #[allow(clippy::too_many_lines)]
    fn feed_inner(
        &mut self,
        input: &[u8],
        mut data: Option<&mut Vec<u8>>,
    ) -> Result<Fed, ChunkError> {
        let mut i = 0;
        let mut body = 0u64;
        while i < input.len() {
            let b = input[i];
            match self.state {
                State::Done => break,
                State::Data => {
                    let take = (input.len() - i)
                        .min(usize::try_from(self.remaining).unwrap_or(usize::MAX));
                    if let Some(out) = data.as_deref_mut() {
                        out.extend_from_slice(&input[i..i + take]);
                    }
                    i += take;
                    body += take as u64;
                    self.remaining -= take as u64;
                    if self.remaining == 0 {
                        self.state = State::DataCr;
                    }
                    continue;
                }
                State::Size { digits } => {
                    let v = match b {
                        b'0'..=b'9' => Some(b - b'0'),
                        b'a'..=b'f' => Some(b - b'a' + 10),
                        b'A'..=b'F' => Some(b - b'A' + 10),
                        _ => None,
                    };
                    match v {
                        Some(v) => {
                            if self.size > (u64::MAX >> 4) {
                                return Err(ChunkError::TooLarge("chunk size overflows 64 bits"));
                            }
                            self.size = (self.size << 4) | u64::from(v);
                            self.state = State::Size {
                                digits: digits.saturating_add(1),
                            };
                        }
                        None if digits == 0 => {
                            return Err(ChunkError::Invalid("chunk size is not hex"))
                        }
                        None if b == b';' || b == b' ' || b == b'\t' => self.state = State::Ext,
                        None if b == b'\r' => self.state = State::SizeLf,
                        None => return Err(ChunkError::Invalid("chunk size is not hex")),
                    }
                    self.bump_line()?;
                }
                State::Ext => {
                    match b {
                        b'\r' => self.state = State::SizeLf,
                        b'\n' => return Err(ChunkError::Invalid("chunk size line without CRLF")),
                        _ => {}
                    }
                    self.bump_line()?;
                }
                State::SizeLf => {
                    if b != b'\n' {
                        return Err(ChunkError::Invalid("chunk size line without CRLF"));
                    }
                    self.line_len = 0;
                    if self.size == 0 {
                        self.state = State::TrailerStart;
                    } else {
                        self.remaining = self.size;
                        self.size = 0;
                        self.state = State::Data;
                    }
                }
                State::DataCr => {
                    if b != b'\r' {
                        return Err(ChunkError::Invalid("chunk data not followed by CRLF"));
                    }
                    self.state = State::DataLf;
                }
                State::DataLf => {
                    if b != b'\n' {
                        return Err(ChunkError::Invalid("chunk data not followed by CRLF"));
                    }
                    self.state = State::Size { digits: 0 };
                }
                State::TrailerStart => {
                    self.state = if b == b'\r' {
                        State::EndLf
                    } else {
                        State::TrailerLine
                    };
                    self.bump_trailer()?;
                }
                State::TrailerLine => {
                    if b == b'\r' {
                        self.state = State::TrailerLf;
                    }
                    self.bump_trailer()?;
                }
                State::TrailerLf => {
                    if b != b'\n' {
                        return Err(ChunkError::Invalid("trailer line without CRLF"));
                    }
                    self.state = State::TrailerStart;
                    self.bump_trailer()?;
                }
                State::EndLf => {
                    if b != b'\n' {
                        return Err(ChunkError::Invalid("last chunk not followed by CRLF"));
                    }
                    self.state = State::Done;
                }
            }
            i += 1;
        }
        Ok(Fed {
            consumed: i,
            body_bytes: body,
            done: self.state == State::Done,
        })
    }

    fn bump_line(&mut self) -> Result<(), ChunkError> {
        self.line_len += 1;
        if self.line_len > MAX_SIZE_LINE {
            return Err(ChunkError::TooLarge("chunk size line too long"));
        }
        Ok(())
    }

    fn bump_trailer(&mut self) -> Result<(), ChunkError> {
        self.trailer_len += 1;
        if self.trailer_len > MAX_TRAILER_BYTES {
            return Err(ChunkError::TooLarge("trailers too long"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(input: &[u8], step: usize) -> Result<(u64, usize), ChunkError> {
        let mut d = ChunkedDecoder::new();
        let mut body = 0;
        let mut pos = 0;
        while pos < input.len() {
            let end = (pos + step).min(input.len());
            let f = d.feed(&input[pos..end])?;
            body += f.body_bytes;
            pos += f.consumed;
            if f.done {
                return Ok((body, pos));
            }
            if f.consumed == 0 {
                break;
            }
        }
        Err(ChunkError::Invalid("incomplete"))
    }

    #[test]
    fn decodes_in_any_split() {
        let input = b"5;ext=1\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\nNEXT";
        for step in 1..input.len() {
            assert_eq!(
                decode_all(input, step),
                Ok((15, input.len() - 4)),
                "step {step}"
            );
        }
    }

    #[test]
    fn feed_data_collects_the_body_in_any_split() {
        let input = b"5;ext=1\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\n";
        for step in 1..input.len() {
            let mut d = ChunkedDecoder::new();
            let mut data = Vec::new();
            let mut pos = 0;
            while !d.is_done() {
                let end = (pos + step).min(input.len());
                pos += d.feed_data(&input[pos..end], &mut data).unwrap().consumed;
            }
            assert_eq!(data, b"hello0123456789", "step {step}");
        }
    }

    #[test]
    fn rejects_bad_framing() {
        assert!(matches!(
            decode_all(b"zz\r\n", 100),
            Err(ChunkError::Invalid(_))
        ));
        assert!(matches!(
            decode_all(b"5\r\nhelloX0\r\n\r\n", 100),
            Err(ChunkError::Invalid(_))
        ));
        assert!(matches!(
            decode_all(b"11111111111111111\r\n", 100),
            Err(ChunkError::TooLarge(_))
        ));
        assert!(matches!(
            decode_all(b"5\nhello\r\n0\r\n\r\n", 100),
            Err(ChunkError::Invalid(_))
        ));
    }
}
