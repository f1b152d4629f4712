//! `compare -c 1,4,16,64`: the concurrency knee, against nginx (whose CPU the test reads
//! itself from /proc) and the embedded server (whose connections it counts itself).

use crate::common::*;
use serde_json::Value;

/// nginx with `workers` workers compressing an 8000-byte page at gzip level 9 for each
/// request (work a real server does per request, so that the server, not the client, is
/// the first to need a whole core).
fn gzip_nginx(workers: usize, www: &Dir) -> Option<Nginx> {
    let words = [
        "alpha",
        "keep",
        "alive",
        "handshake",
        "reuse",
        "tls",
        "round",
        "trip",
    ];
    let mut x: u64 = 0x9e37_79b9;
    let mut page = String::new();
    while page.len() < 8000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        page.push_str(words[(x % words.len() as u64) as usize]);
        page.push(' ');
    }
    page.truncate(8000);
    std::fs::write(www.path("page.html"), page).unwrap();
    let root = www.0.display().to_string();
    Nginx::start_workers(
        workers,
        "gzip on; gzip_min_length 0; gzip_comp_level 9; gzip_types *;",
        1,
        |ports, _| format!("server {{ listen 127.0.0.1:{}; root {root}; }}", ports[0]),
    )
}

/// CPU time (user + system) of `pid` and its children, in seconds, as /proc counts it.
fn tree_cpu_s(pid: u32) -> f64 {
    let children =
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    std::iter::once(pid)
        .chain(children.split_whitespace().map(|c| c.parse().unwrap()))
        .map(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap();
            let rest = &stat[stat.rfind(')').unwrap() + 2..];
            let f: Vec<f64> = rest
                .split_whitespace()
                .map(|x| x.parse().unwrap_or(0.0))
                .collect();
            // utime and stime: fields 14 and 15, the 12th and 13th after the name.
            (f[11] + f[12]) / 100.0
        })
        .sum()
}

fn sweep(args: &[&str]) -> Value {
    let v = compare_json(args);
    let violations = schema_violations("report.schema.json", &v);
    assert!(violations.is_empty(), "{violations:#?}");
    v
}

fn series<'a>(v: &'a Value, strategy: &str) -> &'a Value {
    v["concurrency_sweep"]["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["strategy"] == strategy)
        .unwrap_or_else(|| panic!("no {strategy} series"))
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// Where each series' limit is read: past its knee, or its last step.
fn judged(s: &Value) -> &Value {
    let points = s["points"].as_array().unwrap();
    match s["knee"].as_u64() {
        Some(k) => {
            let i = points.iter().position(|p| p["concurrency"] == k).unwrap();
            &points[i + 1]
        }
        None => points.last().unwrap(),
    }
}

#[test]
fn one_nginx_worker_has_its_knee_where_its_cpu_reaches_a_core() {
    let _g = serial();
    let www = Dir::new("knee-www1");
    let Some(nginx) = gzip_nginx(1, &www) else {
        return;
    };
    let url = format!("{}page.html", nginx.url());
    let pid = nginx.pid().to_string();
    let before = tree_cpu_s(nginx.pid());
    let v = sweep(&[
        &url,
        "-H",
        "Accept-Encoding: gzip",
        "-c",
        "1,4,16,64",
        "-t",
        "1",
        "--rounds",
        "6",
        "--server-pid",
        &pid,
    ]);
    let nginx_cpu = tree_cpu_s(nginx.pid()) - before;
    let sw = &v["concurrency_sweep"];
    assert_eq!(sw["server_cpu_from"], "pids");
    assert_eq!(sw["steps"].as_array().unwrap().len(), 4);
    // The server's CPU the sweep read in its rounds is the CPU nginx used, as /proc
    // counts it for the whole run (in 10 ms ticks; between rounds nginx idles).
    let read: f64 = sw["series"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["points"].as_array().unwrap())
        .map(|p| f(&p["server_cpu_s"]))
        .sum();
    assert!(
        (read - nginx_cpu).abs() <= 0.1 * nginx_cpu + 0.05,
        "the sweep read {read:.3} s of nginx's CPU, /proc says {nginx_cpu:.3} s"
    );
    // Each step's rows carry the server's CPU per request too, from the same PIDs.
    for step in sw["steps"].as_array().unwrap() {
        for row in step["comparison"]["rows"].as_array().unwrap() {
            assert!(
                f(&row["server_cpu_us_per_request"]["median"]) > 0.0,
                "{}",
                row["name"]
            );
        }
    }
    for strategy in ["keepalive", "close"] {
        let s = series(&v, strategy);
        let verdict = s["verdict"]["text"].as_str().unwrap();
        assert!(s["knee"].is_u64(), "{strategy}: no knee: {verdict}");
        assert_eq!(s["limit"], "server", "{strategy}: {verdict}");
        let past = judged(s);
        assert_eq!(past["server_threads"], 1, "{strategy}: {past}");
        assert!(
            f(&past["server_cores"]["median"]) >= 0.9,
            "{strategy}: {past}"
        );
        // The verdict stands on that point's figures: its evidence is the point's.
        let at = format!("points[c={}].server_cores.median", past["concurrency"]);
        let said = s["verdict"]["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["figure"] == at.as_str())
            .unwrap_or_else(|| panic!("no {at} in {}", s["verdict"]));
        assert_eq!(said["value"], past["server_cores"]["median"]);
        assert_eq!(s["verdict"]["code"], "knee");
        // At one request at a time the worker still waits on the client part of each
        // cycle: its core is reached at the knee, not before. Even its busiest round at
        // c=1 used less of it than the median round past the knee (at c=1 how much less
        // is the machine's: 0.78-0.91 of a core on these 2 cores, where gzip is most of
        // a request's work).
        let first = &s["points"][0];
        assert!(
            f(&first["server_cores"]["max"]) < f(&past["server_cores"]["median"]),
            "{strategy}: c=1 {first}, past the knee {past}"
        );
        assert!(
            verdict.contains("stops growing after c=")
                && verdict.contains("of its one core: this is its capacity"),
            "{verdict}"
        );
    }
}

#[test]
fn two_nginx_workers_share_the_two_cores_with_the_client() {
    let _g = serial();
    let cores = std::thread::available_parallelism().unwrap().get();
    if cores != 2 {
        eprintln!("SKIPPED: the verdict is for two workers on two cores; this machine has {cores}");
        return;
    }
    let www = Dir::new("knee-www2");
    let Some(nginx) = gzip_nginx(2, &www) else {
        return;
    };
    let url = format!("{}page.html", nginx.url());
    let pid = nginx.pid().to_string();
    let v = sweep(&[
        &url,
        "-H",
        "Accept-Encoding: gzip",
        "-c",
        "1,4,16,64",
        "--rounds",
        "6",
        "--server-pid",
        &pid,
    ]);
    assert_eq!(v["concurrency_sweep"]["machine_cores"], 2);
    for strategy in ["keepalive", "close"] {
        let s = series(&v, strategy);
        let verdict = s["verdict"]["text"].as_str().unwrap();
        assert_eq!(s["limit"], "machine", "{strategy}: {verdict}");
        assert!(
            verdict.contains("client and server share the machine: its 2 cores are"),
            "{verdict}"
        );
        // Both workers worked.
        assert_eq!(judged(s)["server_threads"], 2, "{strategy}: {}", judged(s));
    }
}

/// Against the embedded server: every step's rows, its server's CPU read from its own
/// threads, the connections it counted equal to those the sweep opened, the HTML's
/// charts and table equal to the JSON, and the text at 80 columns.
#[test]
fn the_embedded_sweep_counts_what_the_server_counted_and_draws_it() {
    let _g = serial();
    let args = ["compare", "-c", "1,8", "--rounds", "6"];
    let Some(v) = check_html(&args, "knee") else {
        return;
    };
    let sw = &v["concurrency_sweep"];
    assert_eq!(sw["server_cpu_from"], "embedded");
    let steps: Vec<u64> = sw["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["concurrency"].as_u64().unwrap())
        .collect();
    assert_eq!(steps, [1, 8]);
    let names: Vec<&str> = sw["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "http keepalive",
            "http close",
            "https keepalive",
            "https close"
        ]
    );
    for s in sw["series"].as_array().unwrap() {
        for p in s["points"].as_array().unwrap() {
            assert!(f(&p["server_cores"]["median"]) > 0.0, "{p}");
            assert!(f(&p["requests_per_s"]["median"]) > 0.0, "{p}");
        }
    }
    // Each step's rows, and the scenarios behind them, are named by their step.
    let rows: Vec<&str> = sw["steps"][1]["comparison"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert!(rows.iter().all(|r| r.starts_with("c=8 ")), "{rows:?}");
    assert_eq!(
        u(&v["server"]["connections_accepted"]),
        opened_in_all(&v),
        "the embedded server's own count of connections"
    );
    let out = run_at_width(
        80,
        &["compare", "-c", "1,8", "--rounds", "2", "--no-progress"],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for line in text.lines() {
        assert!(line.chars().count() <= 80, "{line:?}");
    }
    assert!(text.contains("Concurrency sweep: 2 rounds"), "{text}");
    assert!(text.contains("https close: requests/s"), "{text}");
    assert!(text.contains("At c=8:"), "{text}");
}

#[test]
fn sweep_flags_are_checked() {
    let _machine = shared();
    let cases: [(&[&str], &str); 5] = [
        (
            &["bench", "-c", "1,10"],
            "a list (-c 1,10,50,200) is compare's",
        ),
        (&["compare", "-c", "10,1"], "must rise"),
        (
            &["compare", "-c", "1,2", "--rtt", "10ms,20ms"],
            "sweep one at a time",
        ),
        (
            &["compare", "-c", "1,2", "--server-pid", "1"],
            "the embedded server's CPU is read without it",
        ),
        (
            &[
                "compare",
                "http://127.0.0.1:9/",
                "--server-pid",
                "999999999",
            ],
            "--server-pid 999999999: no such process",
        ),
    ];
    for (args, says) in cases {
        let out = run(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
