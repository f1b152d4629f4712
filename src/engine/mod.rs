//! Running a scenario: OS threads each with a single-threaded tokio runtime and its own
//! `Recorder`, written by the thread's collector alone (`collect`); workers (one per
//! `-c`) run the protocol-independent loop in `worker` (tickets, pacing, stop) and hand
//! each attempt's record to the collector; each protocol's driver (`h1`, `h2`, `h3`)
//! carries the requests over connections opened by `open`, and hands its connections'
//! events to the collector too. No lock or allocation per request.

mod collect;
pub(crate) mod gate;
mod h1;
mod h1loop;
mod h2;
pub(crate) mod h3;
mod handoff;
pub(crate) mod open;
#[cfg(test)]
mod tests;
mod worker;

use std::io::IsTerminal;

use anyhow::Context;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use crate::cpu::{self, CpuTime};
use crate::net::dns::{DnsCache, Resolver};
use crate::net::local_ports::LocalPorts;
use crate::plan::{Scenario, Strategy};
use crate::record::ErrorDetail;
use crate::stats::Recorder;

/// What the metrics are given while a run runs: a client thread's number and its
/// recorder so far (called on the hand-off's thread, `handoff`).
pub(crate) type Live = Arc<dyn Fn(usize, &Recorder) + Send + Sync>;

/// What a run of one scenario produced.
pub(crate) struct RunResult {
    pub recorder: Recorder,
    /// From the start to the end of the last completed request.
    pub wall: Duration,
    /// CPU time of the client's worker threads.
    pub cpu: CpuTime,
}

struct ThreadOut {
    recorder: Recorder,
    last_end: Instant,
    cpu: CpuTime,
}

/// Run one scenario to its stop condition. Only setup failures are errors here;
/// per-request failures are counted in the recorder.
pub(crate) fn run(sc: Arc<Scenario>, show_progress: bool) -> anyhow::Result<RunResult> {
    run_live(sc, show_progress, None)
}

/// `run`, with `live` given each client thread's recorder so far now and then while it
/// runs (the metrics' live values), on a thread of its own (`handoff`).
pub(crate) fn run_live(
    sc: Arc<Scenario>,
    show_progress: bool,
    live: Option<Live>,
) -> anyhow::Result<RunResult> {
    let mut threads = sc.threads.clamp(1, sc.concurrency.max(1));
    if sc.strategy.multiplexed() {
        // Each thread owns its share of the shared connections.
        threads = threads.min(sc.connections.max(1));
    }
    reserve_descriptors(&sc)?;
    let counters: Arc<Vec<collect::Progress>> =
        Arc::new((0..threads).map(|_| collect::Progress::default()).collect());
    let done = Arc::new(AtomicBool::new(false));
    let show_progress = show_progress && std::io::stderr().is_terminal();
    let progress = show_progress.then(|| spawn_progress(&sc, counters.clone(), done.clone()));
    // One DNS cache for the whole run, shared by its threads.
    let needs_dns = sc.origins.iter().any(|o| o.fixed_addrs.is_none());
    let dns_cache = (!sc.dns.no_cache).then(|| Arc::new(DnsCache::new()));
    let gates = Arc::new(gate::Gates::of_scenario(&sc));
    let adder = live
        .map(handoff::Adder::start)
        .transpose()
        .context("starting the metrics' thread")?;
    // Each thread sets up its runtime and resolver, says it is ready, and waits for the
    // common start time: the run's clock starts when every thread can send.
    let (ready_tx, ready_rx) = mpsc::channel::<()>();
    let mut starts = Vec::with_capacity(threads);
    let mut handles = Vec::with_capacity(threads);
    for t in 0..threads {
        let plan = ThreadPlan {
            sc: sc.clone(),
            t,
            threads,
            counters: show_progress.then(|| counters.clone()),
            hand: adder.as_ref().map(handoff::Adder::hand),
            dns_cache: dns_cache.clone(),
            needs_dns,
            gates: gates.clone(),
        };
        let ready_tx = ready_tx.clone();
        let (start_tx, start_rx) = mpsc::channel::<Option<Instant>>();
        let spawned = std::thread::Builder::new()
            .name(format!("handshake-client-{t}"))
            .spawn(move || client_thread(&plan, &ready_tx, &start_rx));
        match spawned {
            Ok(h) => {
                handles.push(h);
                starts.push(start_tx);
            }
            Err(e) => {
                for tx in &starts {
                    let _ = tx.send(None);
                }
                for h in handles {
                    let _ = h.join();
                }
                return Err(anyhow::Error::new(e).context("starting a client thread"));
            }
        }
    }
    drop(ready_tx);
    for _ in 0..threads {
        let _ = ready_rx.recv();
    }
    let overflows_before = crate::net::listen_queue::overflows();
    let start = Instant::now();
    let start_wall = std::time::SystemTime::now();
    for tx in &starts {
        let _ = tx.send(Some(start));
    }
    let gathered = gather(handles, start);
    if let Some(a) = adder {
        a.stop();
    }
    done.store(true, Ordering::Relaxed);
    if let Some(p) = progress {
        let _ = p.join();
    }
    let (mut recorder, last_end, cpu) = gathered?;
    let end = Instant::now();
    recorder.outages = gates.outages((start, start_wall), end);
    recorder.restarts = gates.restarts((start, start_wall), end);
    if let (Some(a), Some(b)) = (overflows_before, crate::net::listen_queue::overflows()) {
        recorder.counts.listen_overflows = b.saturating_sub(a);
    }
    if recorder.error_details[ErrorDetail::PortsExhausted.index()] > 0 {
        recorder.local_ports = Some(LocalPorts::snapshot());
    }
    Ok(RunResult {
        recorder,
        wall: last_end.duration_since(start),
        cpu,
    })
}

/// Raise the open-file limit to what the run holds at most: a descriptor per connection
/// (to each origin) and, in an open loop, each thread's pacing timer. A limit that cannot
/// be raised that far is an error naming `ulimit -n` and the number, before anything is
/// sent: past it, connects would fail as the client's own resource and the run would
/// measure that.
fn reserve_descriptors(sc: &Scenario) -> anyhow::Result<()> {
    let per_origin = if sc.strategy.multiplexed() {
        sc.connections
    } else {
        sc.concurrency
    } as u64;
    let conns = per_origin.saturating_mul(sc.origins.len().max(1) as u64);
    let paced = matches!(sc.load, crate::plan::LoadShape::Open { .. });
    let timers = if paced { sc.threads as u64 } else { 0 };
    let needed = crate::net::descriptors::needed(conns.saturating_add(timers));
    let Err(limit) = crate::net::descriptors::reserve(needed) else {
        return Ok(());
    };
    let timers = if paced { " and its pacing timers" } else { "" };
    anyhow::bail!(
        "this run's {conns} connections{timers} need about {needed} open files, and this process may open {limit} (ulimit -n), a limit it could not raise (its hard limit; only root may raise that): run `ulimit -n {needed}` first, or open fewer connections"
    )
}

/// The client threads' records added up, the last request's end and their CPU; the
/// first thread's error, if one failed.
fn gather(
    handles: Vec<std::thread::JoinHandle<anyhow::Result<ThreadOut>>>,
    start: Instant,
) -> anyhow::Result<(Recorder, Instant, CpuTime)> {
    let mut recorder: Option<Recorder> = None;
    let mut last_end = start;
    let mut cpu_total = CpuTime::default();
    let mut first_err = None;
    for h in handles {
        match h.join() {
            Ok(Ok(out)) => {
                match &mut recorder {
                    Some(r) => *r += &out.recorder,
                    None => recorder = Some(out.recorder),
                }
                last_end = last_end.max(out.last_end);
                cpu_total = cpu_total + out.cpu;
            }
            Ok(Err(e)) => first_err = first_err.or(Some(e)),
            Err(_) => first_err = first_err.or(Some(anyhow::anyhow!("a client thread panicked"))),
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok((recorder.unwrap_or_default(), last_end, cpu_total)),
    }
}

/// What a client thread is given: its number among `threads`, the progress counters
/// when a bar is shown, and the run's DNS cache.
struct ThreadPlan {
    sc: Arc<Scenario>,
    t: usize,
    threads: usize,
    counters: Option<Arc<Vec<collect::Progress>>>,
    /// The metrics' hand-off, when they are exported.
    hand: Option<handoff::Hand>,
    dns_cache: Option<Arc<DnsCache>>,
    needs_dns: bool,
    /// The run's gates: where each origin could not be reached, and the waits between
    /// tries meanwhile.
    gates: Arc<gate::Gates>,
}

/// One client thread: its runtime and resolver set up, ready said, the common start
/// awaited; then its workers run to the stop condition.
fn client_thread(
    p: &ThreadPlan,
    ready_tx: &mpsc::Sender<()>,
    start_rx: &mpsc::Receiver<Option<Instant>>,
) -> anyhow::Result<ThreadOut> {
    let setup = crate::runtime_thread::current_thread_runtime().map(|rt| {
        let dns = {
            let _guard = rt.enter();
            Arc::new(worker::Dns {
                resolver: if p.needs_dns {
                    Resolver::new(&p.sc.dns)
                } else {
                    Resolver::none()
                },
                cache: p.dns_cache.clone(),
            })
        };
        (rt, dns)
    });
    let _ = ready_tx.send(());
    let Ok(Some(start)) = start_rx.recv() else {
        anyhow::bail!("the run was cancelled before it started");
    };
    let (rt, dns) = setup?;
    let run_deadline = p.sc.stop.duration.map(|d| start + d);
    let (collector, notes) = collect::Collector::new(
        start,
        &p.sc.ok_status,
        p.counters.clone().map(|c| (c, p.t)),
        p.hand.clone().map(|h| (h, p.t)),
    );
    if h1loop::eligible(&p.sc) {
        // HTTP/1 over plain TCP: one readiness loop carries the thread's workers.
        drop(notes);
        let mut collector = collector;
        let cpu_start = cpu::thread();
        let (given_up, lookups_cpu) = h1loop::run(
            &p.sc,
            (p.t, p.threads),
            &mut collector,
            (start, run_deadline),
            (rt, dns, &*p.gates),
        )
        .context("the client thread's loop")?;
        let cpu = cpu::thread() - cpu_start + lookups_cpu;
        let collector = collector.finish(given_up);
        return Ok(ThreadOut {
            last_end: collector.last_end,
            recorder: collector.into_recorder(),
            cpu,
        });
    }
    let local = tokio::task::LocalSet::new();
    let guard = rt.enter();
    let at = Clock {
        start,
        run_deadline,
    };
    let in_flight = Rc::new(std::cell::Cell::new(0));
    let endpoints = spawn_workers(p, &local, &notes, &dns, &at, &in_flight);
    // The collector's queue closes when the last of its holders (the workers, their
    // drivers and connections) is gone. It runs as a task of the set: a worker's note
    // wakes it without a system call (the runtime's own waker writes an eventfd).
    let stopper = notes.stopper();
    drop(notes);
    // Out of tokio's cooperative budget: the collector takes everything queued each
    // time it runs (nothing else runs meanwhile on this thread, so that ends), where a
    // budget of 128 receives a turn let 10,000 workers' notes pile up faster than it
    // took them: the queue grew without bound.
    let collecting =
        local.spawn_local(tokio::task::unconstrained(collector.run(in_flight.clone())));
    // CPU while requests run: thread, runtime and recorder setup excluded.
    let cpu_start = cpu::thread();
    let collector = {
        // The set and whatever it still holds (workers given up after an interrupt) end
        // here, inside the runtime, before the recorder is taken.
        let mut local = std::pin::pin!(local);
        rt.block_on(async {
            tokio::select! {
                biased;
                () = &mut local => {}
                // Ctrl-C: the workers take no new tickets; what is still in flight a
                // second later is given up, counted as cut by the run's end.
                () = crate::interrupt::grace_over() => stopper.stop(),
            }
            local.run_until(collecting).await
        })
    }
    .context("the client thread's collector")?;
    let cpu = cpu::thread() - cpu_start;
    if let Some(e) = &endpoints {
        rt.block_on(e.close_all());
    }
    drop(guard);
    drop(rt);
    Ok(ThreadOut {
        last_end: collector.last_end,
        recorder: collector.into_recorder(),
        cpu,
    })
}

/// A thread's times: its start and the run's deadline.
struct Clock {
    start: Instant,
    run_deadline: Option<Instant>,
}

/// The thread's workers, each with its protocol's driver (and the thread's share of the
/// shared connections for h2 and h3), spawned on `local`: in a closed loop all of them
/// now, in an open loop as its dispatcher needs them; the QUIC endpoints to close at the
/// end, if any.
fn spawn_workers(
    p: &ThreadPlan,
    local: &tokio::task::LocalSet,
    notes: &collect::Notes,
    dns: &Arc<worker::Dns>,
    at: &Clock,
    in_flight: &Rc<std::cell::Cell<u64>>,
) -> Option<Rc<crate::proto::h3::client::Endpoints>> {
    let (sc, t, threads) = (&p.sc, p.t, p.threads);
    let limit = (t..sc.concurrency).step_by(threads).count();
    let share = sc.connections / threads + usize::from(t < sc.connections % threads);
    let endpoints = sc
        .strategy
        .quic()
        .then(crate::proto::h3::client::Endpoints::new);
    let open_loop = matches!(sc.load, crate::plan::LoadShape::Open { .. });
    let hire = Hire {
        sc: sc.clone(),
        threads: (t, threads),
        notes: notes.clone(),
        dns: dns.clone(),
        at: Clock {
            start: at.start,
            run_deadline: at.run_deadline,
        },
        in_flight: in_flight.clone(),
        hops: Rc::new(std::cell::RefCell::new(Default::default())),
        pool: (sc.strategy == Strategy::H2).then(|| h2::Pool::new(sc, share, notes.clone())),
        h3_pool: (sc.strategy == Strategy::H3).then(|| h3::Pool::new(sc, share, notes.clone())),
        endpoints: endpoints.clone(),
        tickets: open_loop.then(|| Rc::new(worker::Dispatch::default())),
        turns: sc
            .limits
            .connect_rate
            .map(|r| Arc::new(open::ConnectTurns::new(r / threads as f64, at.start))),
        gates: p.gates.clone(),
        hired: std::cell::Cell::new(0),
    };
    match hire.tickets.clone() {
        None => (0..limit).for_each(|_| hire.one(local)),
        Some(d) => {
            let sc = sc.clone();
            let clock = (at.start, at.run_deadline);
            local.spawn_local(async move {
                let first = (t as u64, threads as u64);
                d.run(&sc, first, clock, limit, || hire.one_here()).await;
            });
        }
    }
    endpoints
}

/// What a thread's workers are made with, and how many it has made.
struct Hire {
    sc: Arc<Scenario>,
    /// This thread's number, of how many.
    threads: (usize, usize),
    notes: collect::Notes,
    dns: Arc<worker::Dns>,
    at: Clock,
    in_flight: Rc<std::cell::Cell<u64>>,
    hops: Rc<std::cell::RefCell<crate::plan::redirect::Hops>>,
    pool: Option<Rc<h2::Pool>>,
    h3_pool: Option<Rc<h3::Pool>>,
    endpoints: Option<Rc<crate::proto::h3::client::Endpoints>>,
    /// An open loop's dispatcher, which hands the workers their tickets.
    tickets: Option<Rc<worker::Dispatch>>,
    /// `--connect-rate`: the thread's turns to connect, shared by its workers.
    turns: Option<Arc<open::ConnectTurns>>,
    /// The run's gates, one per origin.
    gates: Arc<gate::Gates>,
    hired: std::cell::Cell<usize>,
}

impl Hire {
    /// Start the next worker (the `i`th of this thread: worker `t + i * threads` of the
    /// run) with its protocol's driver, on `local`.
    fn one(&self, local: &tokio::task::LocalSet) {
        drop(local.spawn_local(self.worker()));
    }

    /// `one`, from a task of the thread's set.
    fn one_here(&self) {
        drop(tokio::task::spawn_local(self.worker()));
    }

    fn worker(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>> {
        let i = self.hired.get();
        self.hired.set(i + 1);
        let (t, threads) = self.threads;
        let w = t + i * threads;
        let seat = worker::Seat {
            id: w,
            notes: self.notes.clone(),
            run_deadline: self.at.run_deadline,
            in_flight: self.in_flight.clone(),
            hops: self.hops.clone(),
            gates: self.gates.clone(),
        };
        let opener = open::Opener {
            dns: self.dns.clone(),
            tally: self.notes.clone(),
            run_deadline: self.at.run_deadline,
            next_local: w,
            turns: self.turns.clone(),
            gates: Some(self.gates.clone()),
        };
        let (sc, start, tickets) = (self.sc.clone(), self.at.start, self.tickets.clone());
        match (&self.pool, &self.endpoints) {
            (_, Some(endpoints)) => {
                let driver = h3::H3::new(endpoints.clone(), self.h3_pool.clone(), i, opener, start);
                Box::pin(worker::run(sc, seat, driver, tickets))
            }
            (Some(pool), None) => {
                let driver = h2::H2::new(pool.clone(), opener, start);
                Box::pin(worker::run(sc, seat, driver, tickets))
            }
            (None, None) => {
                let driver = h1::H1::new(&sc, opener, start);
                Box::pin(worker::run(sc, seat, driver, tickets))
            }
        }
    }
}

/// A progress bar on stderr, shown only once the run has lasted a second.
fn spawn_progress(
    sc: &Scenario,
    counters: Arc<Vec<collect::Progress>>,
    done: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    let total = sc.stop.requests;
    let duration = sc.stop.duration;
    let name = sc.name.clone();
    std::thread::spawn(move || {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(1) {
            if done.load(Ordering::Relaxed) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let bar = match (total, duration) {
            (Some(n), _) => indicatif::ProgressBar::new(n),
            (None, Some(d)) => indicatif::ProgressBar::new(d.as_millis() as u64),
            _ => indicatif::ProgressBar::new_spinner(),
        };
        bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
        let style = if total.is_some() {
            "{prefix} [{bar:30}] {pos}/{len} requests, {msg}, eta {eta}"
        } else {
            "{prefix} [{bar:30}] {msg}"
        };
        if let Ok(s) = indicatif::ProgressStyle::with_template(style) {
            bar.set_style(s.progress_chars("=> "));
        }
        bar.set_prefix(name);
        let sum = |f: fn(&collect::Progress) -> &AtomicU64| -> u64 {
            counters.iter().map(|c| f(c).load(Ordering::Relaxed)).sum()
        };
        // Rates over the last second: samples every 100 ms.
        let mut window: std::collections::VecDeque<(Instant, u64, u64)> =
            std::collections::VecDeque::new();
        while !done.load(Ordering::Relaxed) {
            let now = Instant::now();
            let (n, new, errors) = (
                sum(|c| &c.requests),
                sum(|c| &c.new_connections),
                sum(|c| &c.errors),
            );
            window.push_back((now, n, new));
            while window
                .front()
                .is_some_and(|f| now.duration_since(f.0) > Duration::from_secs(1))
            {
                window.pop_front();
            }
            let (t0, n0, new0) = window.front().copied().unwrap_or((now, n, new));
            let dt = now.duration_since(t0).as_secs_f64().max(0.1);
            let rates = format!(
                "{:.0} req/s, {:.0} new conn/s, {errors} errors",
                (n - n0) as f64 / dt,
                (new - new0) as f64 / dt
            );
            if total.is_some() {
                bar.set_position(n);
                bar.set_message(rates);
            } else {
                let elapsed = started.elapsed();
                bar.set_position(elapsed.as_millis() as u64);
                bar.set_message(format!(
                    "{rates}, {:.1} s of {:.1} s",
                    elapsed.as_secs_f64(),
                    duration.map_or(0.0, |d| d.as_secs_f64())
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        bar.finish_and_clear();
    })
}
