//! The HTTP/1 response reader (`Conn::read_response`: head parsing, 1xx, framing,
//! bodies) over arbitrary server bytes, delivered in fragments whose sizes come from
//! the input. It must never panic or hang, and what it reports must be consistent.

#![no_main]

use std::io;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};

use handshake::api::h1::{Conn, WaitReadable};
use handshake::api::h1::ReadLimits;
use handshake::api::h1::Taken;
use libfuzzer_sys::fuzz_target;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Server bytes in fragments; at the end, EOF or a reset.
struct Replay<'a> {
    data: &'a [u8],
    pos: usize,
    sizes: [usize; 4],
    turn: usize,
    reset_at_end: bool,
    /// Says it can wait for bytes: the connection lends its read buffer out between
    /// responses (as over plain TCP).
    lends: bool,
}

impl WaitReadable for Replay<'_> {
    fn waits_readable(&self) -> bool {
        self.lends
    }
}

impl AsyncRead for Replay<'_> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.pos == self.data.len() {
            if self.reset_at_end {
                return Poll::Ready(Err(io::ErrorKind::ConnectionReset.into()));
            }
            return Poll::Ready(Ok(()));
        }
        let size = self.sizes[self.turn % 4];
        self.turn += 1;
        let n = size.min(self.data.len() - self.pos).min(buf.remaining());
        let pos = self.pos;
        buf.put_slice(&self.data[pos..pos + n]);
        self.pos += n;
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Replay<'_> {
    fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, b: &[u8]) -> Poll<io::Result<usize>> {
        Poll::Ready(Ok(b.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
    })
}

fuzz_target!(|input: &[u8]| {
    if input.len() < 3 {
        return;
    }
    let (flags, a, b) = (input[0], input[1] as usize, input[2] as usize);
    let data = &input[3..];
    let stream = Replay {
        data,
        pos: 0,
        sizes: [
            a % 7 + 1,
            a * 31 % 4096 + 1,
            b % 3 + 1,
            b * 257 % 70_000 + 1,
        ],
        turn: 0,
        reset_at_end: flags & 2 != 0,
        lends: flags & 4 != 0,
    };
    let head_request = flags & 1 != 0;
    runtime().block_on(async {
        let mut conn = Conn::new(stream);
        let mut total = 0u64;
        // Up to three responses on the connection, as a keep-alive client would read them.
        for _ in 0..3 {
            match conn
                .read_response(head_request, ReadLimits::default(), Taken::default())
                .await
            {
                Ok(r) => {
                    assert!(r.body_bytes <= r.bytes, "{r:?}");
                    // Every 3xx to 5xx response's example is wanted, and only theirs.
                    assert_eq!(
                        r.said.is_some(),
                        (300..600).contains(&r.head.status),
                        "{r:?}"
                    );
                    assert!(!r.head.is_informational(), "a 1xx is never the response");
                    total += r.bytes;
                    assert!(total <= data.len() as u64, "more bytes than were sent");
                    if r.leftover || r.eof || !r.head.persistent {
                        break;
                    }
                }
                Err(f) => {
                    assert!(conn.got_body_bytes <= conn.got_bytes);
                    let _ = f;
                    break;
                }
            }
        }
    });
});
