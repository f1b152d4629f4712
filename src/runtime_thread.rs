//! A service on a thread of its own with a current-thread tokio runtime (the embedded
//! server with one thread, the audit): started, told its bound addresses, stopped.

use std::future::Future;

use anyhow::Context;

/// A running thread; stopping it drops its runtime and every task on it.
pub(crate) struct RuntimeThread {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RuntimeThread {
    /// Start `name`: on the new thread, `on_thread` runs first, then `start` (which binds
    /// and spawns its tasks); returns `start`'s value once it has finished.
    pub(crate) fn spawn<T, F, Fut>(
        name: &str,
        on_thread: impl FnOnce() + Send + 'static,
        start: F,
    ) -> anyhow::Result<(T, RuntimeThread)>
    where
        T: Send + 'static,
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = anyhow::Result<T>>,
    {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<anyhow::Result<T>>();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                on_thread();
                let rt = match current_thread_runtime() {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.into()));
                        return;
                    }
                };
                rt.block_on(async move {
                    let started = start().await;
                    let ok = started.is_ok();
                    let _ = ready_tx.send(started);
                    if ok {
                        let _ = stop_rx.await;
                    }
                });
            })
            .with_context(|| format!("starting the {name} thread"))?;
        let value = ready_rx
            .recv()
            .with_context(|| format!("the {name} thread ended"))??;
        Ok((
            value,
            RuntimeThread {
                stop: Some(stop_tx),
                thread: Some(thread),
            },
        ))
    }

    /// Stop the runtime and wait for the thread.
    pub(crate) fn stop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A current-thread tokio runtime with I/O and time, for one command's async work.
pub(crate) fn current_thread_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}
