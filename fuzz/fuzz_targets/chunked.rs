//! The chunked decoder over arbitrary input: fed whole, and fed in pieces, it must reach
//! the same verdict (done or not, bytes consumed, body bytes, error or not), never
//! consume input it was not given, and `feed_data` must hand out exactly the body bytes.

#![no_main]

use handshake::api::h1::ChunkedDecoder;
use libfuzzer_sys::fuzz_target;

#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Done { consumed: usize, body: u64 },
    NeedMore { body: u64 },
    Invalid,
    TooLarge,
}

fn run(data: &[u8], step: usize, collect: bool) -> (Verdict, Vec<u8>) {
    let mut d = ChunkedDecoder::new();
    let mut pos = 0;
    let mut body = 0u64;
    let mut collected = Vec::new();
    while pos < data.len() {
        let end = (pos + step).min(data.len());
        let piece = &data[pos..end];
        let fed = if collect {
            d.feed_data(piece, &mut collected)
        } else {
            d.feed(piece)
        };
        match fed {
            Ok(f) => {
                assert!(f.consumed <= piece.len());
                assert!(f.body_bytes <= f.consumed as u64);
                body += f.body_bytes;
                pos += f.consumed;
                if f.done {
                    assert!(d.is_done());
                    return (
                        Verdict::Done {
                            consumed: pos,
                            body,
                        },
                        collected,
                    );
                }
                assert_eq!(f.consumed, piece.len(), "input left over before the end");
            }
            Err(handshake::api::h1::ChunkError::Invalid(_)) => return (Verdict::Invalid, collected),
            Err(handshake::api::h1::ChunkError::TooLarge(_)) => {
                return (Verdict::TooLarge, collected)
            }
        }
    }
    (Verdict::NeedMore { body }, collected)
}

fuzz_target!(|input: &[u8]| {
    let Some((&split, data)) = input.split_first() else {
        return;
    };
    let (whole, _) = run(data, data.len().max(1), false);
    let step = usize::from(split % 17) + 1;
    let (pieces, collected) = run(data, step, true);
    assert_eq!(whole, pieces, "step {step}");
    let body = match pieces {
        Verdict::Done { body, .. } | Verdict::NeedMore { body } => Some(body),
        _ => None,
    };
    if let Some(body) = body {
        assert_eq!(
            collected.len() as u64,
            body,
            "feed_data hands out the body bytes"
        );
    }
});
