//! Names looked up beside the readiness loop. The resolver is async, and a lookup must not
//! hold up the other workers' requests (nor their clocks): a thread of its own runs the
//! lookups the workers ask for on the client thread's runtime, as many at once as are
//! asked, through the run's cache as the task way's (`worker::Dns::lookup`), and wakes
//! the loop with each answer. A cache hit is taken in the loop itself (`DnsCache::hit`).
//! The thread's CPU time is the run's too (the task way looks up on the client thread).

use std::io;
use std::net::IpAddr;
use std::sync::mpsc::{channel, Receiver, TryIter};
use std::sync::Arc;
use std::thread::JoinHandle;

use tokio::runtime::Runtime;
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};

use super::super::worker::Dns;
use crate::cpu::{self, CpuTime};
use crate::net::dns::Resolution;
use crate::record::Failure;

/// An answer for worker `worker`'s connection `gen`.
pub(super) struct Looked {
    pub worker: usize,
    pub gen: usize,
    pub result: Result<Arc<[IpAddr]>, Failure>,
    pub how: Resolution,
}

/// The lookups' thread, and the way to it and back.
pub(super) struct Lookups {
    ask: Option<UnboundedSender<(usize, usize)>>,
    answers: Receiver<Looked>,
    helper: Option<JoinHandle<CpuTime>>,
}

impl Lookups {
    /// Look up `host` for whoever asks, on `rt`, waking the loop by `waker` with each
    /// answer.
    pub(super) fn start(
        rt: Runtime,
        dns: Arc<Dns>,
        host: String,
        waker: mio::Waker,
    ) -> io::Result<Self> {
        let (ask, mut asked) = unbounded_channel::<(usize, usize)>();
        let (answer, answers) = channel();
        let waker = Arc::new(waker);
        let helper = std::thread::Builder::new()
            .name("handshake-dns".into())
            .spawn(move || {
                let local = tokio::task::LocalSet::new();
                local.block_on(&rt, async move {
                    while let Some((worker, gen)) = asked.recv().await {
                        let (dns, host) = (dns.clone(), host.clone());
                        let (answer, waker) = (answer.clone(), waker.clone());
                        tokio::task::spawn_local(async move {
                            let (result, how) = dns.lookup(&host).await;
                            let looked = Looked {
                                worker,
                                gen,
                                result,
                                how,
                            };
                            if answer.send(looked).is_ok() {
                                // The loop is gone when it cannot be woken: nothing to do.
                                let _ = waker.wake();
                            }
                        });
                    }
                });
                cpu::thread()
            })?;
        Ok(Lookups {
            ask: Some(ask),
            answers,
            helper: Some(helper),
        })
    }

    /// Worker `worker`'s connection `gen` needs the name's addresses.
    pub(super) fn ask(&self, worker: usize, gen: usize) {
        if let Some(ask) = &self.ask {
            // The thread runs until the loop drops this: it cannot be gone before.
            let _ = ask.send((worker, gen));
        }
    }

    /// The answers that came.
    pub(super) fn answers(&self) -> TryIter<'_, Looked> {
        self.answers.try_iter()
    }
}

impl Lookups {
    /// No more to ask: the thread ends (lookups under way are dropped); its CPU time.
    pub(super) fn finish(mut self) -> CpuTime {
        self.end()
    }

    fn end(&mut self) -> CpuTime {
        self.ask.take();
        self.helper
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Lookups {
    fn drop(&mut self) {
        self.end();
    }
}
